/** Pages through `items({limit})` until a page has no `next`; the ids seen, in order. */
export async function pageAll(log: { items(q: { limit: number; after?: string }): Promise<{ items: { itemId: string }[]; next?: string }> }, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const page = await log.items({ limit, ...(after !== undefined ? { after } : {}) });
    seen.push(...page.items.map((s) => s.itemId));
    if (page.next === undefined) return seen;
    after = page.next;
  }
  throw new Error('more than 100 pages');
}
