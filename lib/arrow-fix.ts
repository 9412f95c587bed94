/**
 * Work around apache-arrow 18's IPC writer emitting a zero-length value buffer for a Bool column
 * whose values are all null; Lance's (arrow-rs) reader rejects such a batch ("Need at least 1
 * bytes for bitmap in buffers[0]"), and `value_bool` is null in almost every checkpoint batch.
 * We hand the assembler a zero-filled bitmap instead of the placeholder. LanceDB loads arrow's
 * CommonJS build, so both builds are patched. test/unit/schema.test.ts covers it.
 */
import { createRequire } from 'node:module';
import { VectorAssembler as EsmAssembler } from 'apache-arrow/visitor/vectorassembler';

interface BoolData {
  length: number;
  nullCount: number;
}
interface AssemblerProto {
  visitBool(data: BoolData): unknown;
  __dgclPatched?: boolean;
}

function patch(proto: AssemblerProto): void {
  if (proto.__dgclPatched) return;
  const original = proto.visitBool;
  proto.visitBool = function (this: unknown, data: BoolData) {
    if (data.length > 0 && data.nullCount >= data.length) {
      const zeros = new Uint8Array(Math.ceil(data.length / 8));
      const view = Object.create(data as object, {
        nullCount: { value: 0 },
        values: { value: zeros },
        offset: { value: 0 },
      }) as BoolData;
      return original.call(this, view);
    }
    return original.call(this, data);
  };
  proto.__dgclPatched = true;
}

patch(EsmAssembler.prototype as unknown as AssemblerProto);
const lancedbRequire = createRequire(createRequire(import.meta.url).resolve('@lancedb/lancedb'));
const cjs = lancedbRequire('apache-arrow/visitor/vectorassembler') as {
  VectorAssembler: { prototype: AssemblerProto };
};
patch(cjs.VectorAssembler.prototype);
