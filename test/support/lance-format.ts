/**
 * The Lance file format version written in a data file: its last 8 bytes are the major and
 * minor version (u16 little-endian each) and the magic "LANC". 2.0 files say 0.3.
 */
export function fileFormat(tail: Uint8Array): string {
  const b = Buffer.from(tail.subarray(tail.length - 8));
  if (b.subarray(4).toString('latin1') !== 'LANC') throw new Error(`not a Lance file (tail ${b.toString('hex')})`);
  return `${b.readUInt16LE(0)}.${b.readUInt16LE(2)}`;
}
