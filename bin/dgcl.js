#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's loader (no build step to forget).
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
