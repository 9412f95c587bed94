// Bundles only (infra/stack.ts aliases `@lancedb/lancedb` here): CommonJS, so esbuild turns the ESM imports
// of lib/ into property reads of this module.exports, which is the layer's CommonJS build.
module.exports = require('../layer.ts').loadLayerModule('@lancedb/lancedb');
