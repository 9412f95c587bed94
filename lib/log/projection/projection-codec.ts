/**
 * The listing projection's stored form of one item's aggregate (lib/log/projection/stored.ts): a JSON
 * array in a fixed order instead of an object, about half the bytes and faster to parse (the
 * parse is most of a fresh process's listing). Pure; decoding checks every field's type and
 * throws on anything else (the caller then ignores the stored projection).
 */
import type { Cursor, Failure } from '../../types.ts';
import type { ItemAggregate, Pos } from '../read/summary.ts';

type J = unknown;

export function encodeAggregate(a: ItemAggregate): J[] {
  const f = a.failure;
  return [
    a.itemId,
    a.lastSeq,
    a.attempts,
    pos(a.first),
    a.firstRoot,
    a.firstParent,
    pos(a.created),
    a.root,
    a.parent,
    pos(a.cursorAt),
    cursor(a.cursor),
    pos(a.stepAt),
    a.stepFailed,
    pos(a.failureAt),
    f && [f.stepName, f.attempt, f.errorType, f.errorDump, f.traceback, f.seq],
    pos(a.terminalAt),
    a.terminal,
    pos(a.loopCursorAt),
    cursor(a.loopCursor),
  ];
}

const pos = (p: Pos | null): J => p && [p.seq, p.id];
const cursor = (c: Cursor | null): J => c && [c.stepName, c.stepIndex, c.stepInstanceId, c.iteration, c.attempt, c.checkpointId];

export class ProjectionFormatError extends Error {}

function bad(what: string): never {
  throw new ProjectionFormatError(`stored projection: ${what}`);
}

const isNum = (x: J): x is number => typeof x === 'number' && Number.isFinite(x);
const str = (x: J, what: string): string => (typeof x === 'string' ? x : bad(what));
const strOrNull = (x: J, what: string): string | null => (x === null || typeof x === 'string' ? x : bad(what));
const num = (x: J, what: string): number => (isNum(x) ? x : bad(what));
const numOrNull = (x: J, what: string): number | null => (x === null || isNum(x) ? x : bad(what));

function arr(x: J, n: number, what: string): J[] {
  return Array.isArray(x) && x.length === n ? x : bad(what);
}

function decodePos(x: J, what: string): Pos | null {
  if (x === null) return null;
  const [seq, id] = arr(x, 2, what);
  return { seq: num(seq, what), id: str(id, what) };
}

function decodeCursor(x: J): Cursor | null {
  if (x === null) return null;
  const v = arr(x, 6, 'cursor');
  return {
    stepName: strOrNull(v[0], 'cursor'),
    stepIndex: numOrNull(v[1], 'cursor'),
    stepInstanceId: strOrNull(v[2], 'cursor'),
    iteration: numOrNull(v[3], 'cursor'),
    attempt: num(v[4], 'cursor'),
    checkpointId: str(v[5], 'cursor'),
  };
}

function decodeFailure(x: J): Failure | null {
  if (x === null) return null;
  const v = arr(x, 6, 'failure');
  return {
    stepName: strOrNull(v[0], 'failure'),
    attempt: num(v[1], 'failure'),
    errorType: strOrNull(v[2], 'failure'),
    errorDump: strOrNull(v[3], 'failure'),
    traceback: strOrNull(v[4], 'failure'),
    seq: num(v[5], 'failure'),
  };
}

/**
 * Equal values within one item are decoded once: the first event is usually its creation, the
 * cursor's event its last step and often its terminal one, and a root item is its own root.
 * Parsed aggregates are kept (a chunk's, for the next page), and the duplicate copies were about
 * a third of their heap (docs/design/performance.md, "The listing projection"). Safe because
 * kept aggregates and their parts are frozen.
 */
export function decodeAggregate(x: J): ItemAggregate {
  const v = arr(x, 19, 'item');
  const terminal = v[16];
  if (terminal !== null && terminal !== 'completed' && terminal !== 'filtered') bad('terminal');
  if (typeof v[12] !== 'boolean') bad('stepFailed');
  const itemId = str(v[0], 'itemId');
  const sameId = (s: string | null): string | null => (s === itemId ? itemId : s);
  const seen: Pos[] = [];
  const position = (y: J, what: string): Pos | null => {
    const p = decodePos(y, what);
    if (p === null) return null;
    const had = seen.find((q) => q.seq === p.seq && q.id === p.id);
    if (had) return had;
    seen.push(p);
    return p;
  };
  return {
    itemId,
    lastSeq: num(v[1], 'lastSeq'),
    attempts: num(v[2], 'attempts'),
    first: position(v[3], 'first'),
    firstRoot: sameId(str(v[4], 'firstRoot'))!,
    firstParent: strOrNull(v[5], 'firstParent'),
    created: position(v[6], 'created'),
    root: sameId(strOrNull(v[7], 'root')),
    parent: strOrNull(v[8], 'parent'),
    cursorAt: position(v[9], 'cursorAt'),
    cursor: decodeCursor(v[10]),
    stepAt: position(v[11], 'stepAt'),
    stepFailed: v[12],
    failureAt: position(v[13], 'failureAt'),
    failure: decodeFailure(v[14]),
    terminalAt: position(v[15], 'terminalAt'),
    terminal: terminal as ItemAggregate['terminal'],
    loopCursorAt: position(v[17], 'loopCursorAt'),
    loopCursor: decodeCursor(v[18]),
  };
}
