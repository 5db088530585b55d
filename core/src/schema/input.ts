/** One failing field of a request, the path relative to its body, query or path parameters. */
export interface FieldIssue {
  readonly path: ReadonlyArray<string | number>;
  readonly message: string;
}

/** No request of the API nests deeper; a telemetry event's extra keys get this much room too. */
export const MAX_INPUT_DEPTH = 32;

/**
 * What no schema should be shown of a client's input, checked before any schema runs:
 * - a NUL character in any string or object key (no store keeps one in text, Postgres refuses
 *   it, and no field of the API needs one), ids in paths included;
 * - nesting deeper than `MAX_INPUT_DEPTH` (a 10 KB body can nest 5,000 arrays deep, and the
 *   schema library's error formatter recurses into the value it quotes).
 * Iterative, so that the check itself cannot overflow the stack. `nul: false` leaves NULs to the
 * caller (telemetry drops such events rather than refusing the batch).
 */
export const inputProblems = (value: unknown, options: { readonly nul?: boolean } = {}): FieldIssue[] => {
  const checkNul = options.nul ?? true;
  const found: FieldIssue[] = [];
  const pending: Array<[unknown, ReadonlyArray<string | number>]> = [[value, []]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [v, path] = next;
    if (typeof v === "string") {
      if (checkNul && v.includes("\0")) found.push({ path, message: "must not contain a NUL character" });
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (path.length >= MAX_INPUT_DEPTH) {
      found.push({ path, message: `must not be nested more than ${MAX_INPUT_DEPTH} levels deep` });
      continue;
    }
    const entries: Array<[string | number, unknown]> = Array.isArray(v)
      ? v.map((item, i) => [i, item])
      : Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, item] = entries[i]!;
      if (checkNul && typeof k === "string" && k.includes("\0"))
        found.push({ path: [...path, k], message: "must not contain a NUL character" });
      else pending.push([item, [...path, k]]);
    }
  }
  return found;
};
