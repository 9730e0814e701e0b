/**
 * EUIs as Basics Station writes them: ID6 (`b827:ebff:fe61:51b0`, with `::` for a run of zero
 * groups), dashed or colon bytes (`B8-27-EB-FF-FE-61-51-B0`), 16 plain hex digits, or a number.
 * Outpost's own form is 16 upper-case hex digits.
 */
export function parseEui(value: unknown): string | undefined {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) return undefined;
    return value.toString(16).toUpperCase().padStart(16, '0');
  }
  if (typeof value !== 'string' || value.length > 40) return undefined;
  const text = value.trim();
  if (/^[0-9A-Fa-f]{16}$/.test(text)) return text.toUpperCase();
  if (/^[0-9A-Fa-f]{2}([-:][0-9A-Fa-f]{2}){7}$/.test(text)) return text.replace(/[-:]/g, '').toUpperCase();
  return parseId6(text);
}

function parseId6(text: string): string | undefined {
  if (!/^[0-9A-Fa-f:]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 4 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array<string>(Math.max(0, missing)).fill('0'), ...tail];
  if (all.some((g) => g.length === 0 || g.length > 4)) return undefined;
  return all.map((g) => g.padStart(4, '0')).join('').toUpperCase();
}

/** `B827EBFFFE6151B0` → `b8-27-eb-ff-fe-61-51-b0`: the dashed form the station sends EUIs in. */
export function dashedEui(eui: string): string {
  return eui.toLowerCase().match(/../g)!.join('-');
}
