/**
 * The shape of one simulated schedule's configuration (test/sim/config.ts draws it from the seed)
 * and the scenario generators' names.
 */
export type CoordChoice = 'objects' | 'table' | 'sqlite';

export const FOCUSES = ['takeover', 'retirement', 'faults', 'generations', 'deletes', 'own-reads', 'relist', 'incarnations', 'repair', 'mixed', 'listings', 'sealing', 'own-merges', 'markers', 'late', 'zombie-seals', 'stale-merges', 'swept', 'repair-objects', 'unfenced', 'repair-lost', 'switch-late'] as const;
export type Focus = (typeof FOCUSES)[number];

export interface SimConfig {
  focus: Focus;
  writers: number;
  slots: number;
  leaseTtlMs: number;
  mergeEveryCommits: number;
  /** Small ones rotate generations by size too (a commit of 10 small rows is ~7 KB). */
  mergeEveryBytes: number;
  /** The writers' idle merge (0: off). */
  mergeIdleMs: number;
  cachedItems: number;
  maxBatchesPerCommit: number;
  claimRetentionMs: number;
  faultRate: number;
  priorityBias: number;
  deliveries: number;
  reads: number;
  items: number;
  /** Budgets of the other actions: passes of maintenance, own merges, closes, clock moves, pauses. */
  maintains: number;
  merges: number;
  closes: number;
  clockMoves: number;
  pauses: number;
  /** Where markers and claims live: objects beside the log, the lease table, or a local log's SQLite file. */
  coord: CoordChoice;
  /** The lease store: the simulated table (DynamoDB's rules, in memory), or the real local one of lease files. */
  leases: 'table' | 'local';
  maintainers: 1 | 2;
  /** Deletes (0: none), their retention, and whether old deletes are delivered again later. */
  deletions: number;
  deletionRetentionMs: number;
  redeliverDeletes: boolean;
  /** Share of batches that report a failed step (retried with the next attempt). */
  failures: number;
  /** Blob buffers are reused (zeroed) by the caller once their batch is acked. */
  reuseBuffers: boolean;
  /** Share of batches with a blob value. */
  blobs: number;
  /** Renewals the lease store leaves unanswered (1: all: every lease lasts its ttl from its acquire). */
  renewalsLost: number;
  /** Largest skew of a process's clock against true time (0: one clock). */
  skewMs: number;
  /** Jumps of one process's clock. */
  jumps: number;
  /** Crashes of writers, maintainers, readers and deleters (any mix). */
  crashes: number;
  /** Share of a crashed process's requests in flight that land later anyway. */
  crashLanding: number;
  /** SDK resends of writes that may be resent (0: none). */
  resends: number;
  /**
   * Chance that a generation's marker PUT times out, and that one that landed is resent if the
   * SDK may resend it (0: none steered). Late copies of those markers then land only once the
   * generation's marker or dataset was deleted (a retirement, a sweep): a marker landing after
   * its generation is gone (scheduler.ts `lateHold`).
   */
  lateMarkers: number;
  /** Fault bursts: chance per release that one begins (0: none), and what they hit (default: any kind of request). */
  burstChance: number;
  burstTargets?: readonly string[];
  /** Chance that an actor pauses right after a write of it lands (0: never; scheduler.ts `windows`). */
  windows: number;
  /** Chance that a delivery or a read goes to the item most recently delivered (contention on one item). */
  hot: number;
  /** Chance that a reader stalls after a request of a read (scheduler.ts `readerStalls`). */
  readerStalls: number;
  /** Reads started right after a step of a protocol lands (a commit, a fence, a seal, a retirement step), and their chance. */
  reactiveReads: number;
  reactiveChance: number;
  /**
   * Reactions at protocol points the log reports to its test hooks (scheduler-independent
   * steering): a writer's lease runs out as it is about to commit, while another writer takes
   * deliveries and readers read its items (`takeoverOnCommit`); its items are read right after its
   * commit landed, before it is confirmed (`readOnLanding`); an item is read as a merge is about to
   * commit to the base and to delete the generation (`readOnMerge`). Each a chance, within
   * `reactions` in all.
   */
  reactions: number;
  /** Requests after which their actor pauses (a regular expression of request kinds), and the chance. */
  slowSteps?: { kinds: string; probability: number };
  takeoverOnCommit: number;
  readOnLanding: number;
  /**
   * Of those reads right after a commit landed: the chance that the writer's confirmation waits
   * until the read, and the same read through the writer's process after it, ended (the own-reads
   * focus: its memory must not answer for the landing commit's items).
   */
  holdOnLanding: number;
  readOnMerge: number;
  /**
   * Repairs of the log (lib/log/admin/rehome.ts) while writers run: each takes every lease of the
   * log's scope (waiting for live writers' to run out), seals, rebuilds the records under a new id
   * and switches. Only on logs kept in the lease table, without deletes (a repair rebuilds no
   * claim of a deleted checkpoint: a redelivered batch of it is a new incarnation, which the
   * history would take for a second first ack).
   */
  repairs: number;
  /**
   * The relist focus's steered windows (test/sim/steer.ts): which race its reactions set up, the
   * chance at each protocol point, and how many (null: none; the other reactions run instead).
   */
  steer: { window: SteerWindow; chance: number; count: number } | null;
  /**
   * How long a repair keeps the old scope's leases held after its switch (the log's test-only
   * `repairLeaseHoldMs`; undefined: the library's default, days), and the chance that the clock
   * moves past it once a repair returned: a writer or maintainer still on the old records can then
   * take one of them.
   */
  repairLeaseHoldMs?: number;
  clockAfterRepair: number;
  /** The repair's renewals are answered even where `renewalsLost` drops the others' (it keeps its leases while writers lose theirs). */
  repairRenews: boolean;
  /** Chance that deliveries go to every writer as a repair's last rebuilt record, or its switch, lands. */
  deliverOnRepair: number;
  /**
   * Chance that a repair loses every lease of the old scope as it is about to seal, and waits
   * until a writer took a slot and marked a generation (the repair-lost focus: test/sim/steer-repair.ts).
   */
  repairLoses: number;
  /**
   * Chance that a repair's switch times out and lands once a writer took a slot of the old scope
   * (the switch-late focus: test/sim/steer-repair.ts).
   */
  switchLate: number;
  /** Chance that an item's delivery goes to the writer that took its latest one (a queue partitioned by item). */
  sticky: number;
  /**
   * Reactions around deletes (incarnations): as a writer's merge retires a generation (its retired
   * marker landed), its next delete request fails (`retireFaults`: the merge stays queued with its
   * base commit done) and an item whose latest rows the generation holds is deleted
   * (`deleteOnRetire`); once a delete returned, a maintenance pass runs (`passAfterDelete`), after
   * the writer that last took the item merged its shard (`mergeBeforePass`), and the item is
   * created again only after that pass (`holdRecreate`).
   */
  retireFaults: number;
  deleteOnRetire: number;
  passAfterDelete: number;
  mergeBeforePass: number;
  holdRecreate: number;
}

export type SteerWindow = 'fence' | 'retirement' | 'seal' | 'rotation' | 'moved' | 'point' | 'listed' | 'zombie' | 'purge' | 'vanish' | 'overtaken' | 'ended' | 'fenced' | 'frozen' | 'superseded' | 'stale' | 'swept' | 'unfenced';
