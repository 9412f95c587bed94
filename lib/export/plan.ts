/**
 * The export's first pass, over four light columns: how many events there are, a sample of
 * their item ids (to cut the log into item-id ranges of about equal size), and the value kinds
 * each field holds (the Parquet column types). Memory: the sample and one entry per field name.
 */
import type * as arrow from 'apache-arrow';
import { Utf8Column } from '../log/columns.ts';
import type { EventVisitor } from '../log/read/stream.ts';

export const PLAN_COLUMNS = ['item_id', 'event_type', 'field_name', 'value_kind'] as const;

/** Item ids kept by the reservoir: range sizes come out within a few percent. */
const SAMPLE = 4096;

export interface FieldKinds {
  kinds: Set<string>;
  /** Some event appended to it (its value is a list). */
  appended: boolean;
}

export interface Plan {
  events: number;
  /** A uniform sample of the events' item ids. */
  sample: string[];
  fields: Map<string, FieldKinds>;
}

const APPEND = Buffer.from('FIELD_APPEND');

export class PlanVisitor implements EventVisitor<Plan> {
  private events = 0;
  private readonly sample: string[] = [];
  private readonly fields = new Map<string, FieldKinds>();
  // A fixed-seed generator (xorshift32): the same log gives the same ranges.
  private rnd = 0x9e3779b9;

  private next(): number {
    let x = this.rnd;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rnd = x >>> 0;
    return this.rnd / 4294967296;
  }

  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const items = new Utf8Column(b, 'item_id');
    const types = new Utf8Column(b, 'event_type');
    const names = new Utf8Column(b, 'field_name');
    const kinds = new Utf8Column(b, 'value_kind');
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      this.events++;
      if (this.sample.length < SAMPLE) this.sample.push(items.get(r)!);
      else {
        const j = Math.floor(this.next() * this.events);
        if (j < SAMPLE) this.sample[j] = items.get(r)!;
      }
      const name = names.get(r);
      if (name === null) continue;
      let f = this.fields.get(name);
      if (!f) this.fields.set(name, (f = { kinds: new Set(), appended: false }));
      const kind = kinds.get(r);
      if (kind !== null) f.kinds.add(kind);
      if (types.is(r, APPEND)) f.appended = true;
    }
  }

  done(): Plan {
    return { events: this.events, sample: this.sample, fields: this.fields };
  }
}

/** Byte order of UTF-8, which is how Lance compares strings in a filter. */
export function byteCompare(a: string, b: string): number {
  return a === b ? 0 : Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Cut points splitting the sampled ids into `parts` ranges of about equal event counts:
 * range i is [cuts[i-1], cuts[i]) with open ends. Ties collapse (one item never splits).
 */
export function cutPoints(sample: readonly string[], parts: number): string[] {
  if (parts <= 1 || sample.length === 0) return [];
  const sorted = [...sample].sort(byteCompare);
  const cuts: string[] = [];
  for (let i = 1; i < parts; i++) {
    const c = sorted[Math.floor((i * sorted.length) / parts)]!;
    if (cuts.length === 0 || byteCompare(c, cuts[cuts.length - 1]!) > 0) cuts.push(c);
  }
  return cuts;
}
