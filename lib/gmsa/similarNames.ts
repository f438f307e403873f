/**
 * Names close to a mistyped one: at most a few edits away (a quarter of the name's length, at
 * least one, at most three), nearest first. Only the names a denial may show are passed in.
 */
export function similarNames(name: string, candidates: Iterable<string>, max = 3): string[] {
  const limit = Math.min(3, Math.max(1, Math.floor(name.length / 4)));
  const close: Array<{ candidate: string; distance: number }> = [];
  for (const candidate of candidates) {
    if (candidate === name || Math.abs(candidate.length - name.length) > limit) continue;
    const distance = editDistance(name, candidate, limit);
    if (distance <= limit) close.push({ candidate, distance });
  }
  return close
    .sort((a, b) => a.distance - b.distance || (a.candidate < b.candidate ? -1 : 1))
    .slice(0, max)
    .map((c) => c.candidate);
}

/** Levenshtein distance, giving up (returning limit + 1) once every path is past the limit. */
function editDistance(a: string, b: string, limit: number): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      current.push(value);
      best = Math.min(best, value);
    }
    if (best > limit) return limit + 1;
    previous = current;
  }
  return previous[b.length]!;
}
