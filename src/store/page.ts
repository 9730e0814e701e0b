/**
 * A list page's byte budget (docs/api.md, "Pages"): `sizeOf` says how many bytes a record adds to
 * the answer; a page ends before the record that would take it past `maxBytes`.
 */
export interface PageBudget<T> {
  maxBytes: number;
  sizeOf(record: T): number;
}

/**
 * Takes up to `limit` records from `rows` (a statement iterator asked for `limit + 1` rows) within
 * the budget, and stops reading there: the statement is closed and the rows after it are never
 * loaded. `more` says a next page exists. The first record is always taken, whatever its size, so
 * a cursor always moves forward.
 */
export function takePage<R, T>(rows: IterableIterator<R>, limit: number, budget: PageBudget<T> | undefined, toRecord: (row: R) => T): { data: T[]; more: boolean } {
  const data: T[] = [];
  let bytes = 0;
  let more = false;
  try {
    for (const row of rows) {
      if (data.length === limit) {
        more = true;
        break;
      }
      const record = toRecord(row);
      if (budget) {
        const size = budget.sizeOf(record);
        if (data.length > 0 && bytes + size > budget.maxBytes) {
          more = true;
          break;
        }
        bytes += size;
      }
      data.push(record);
    }
  } finally {
    // An early break already closed it; this covers a throw in toRecord or sizeOf.
    rows.return?.();
  }
  return { data, more };
}
