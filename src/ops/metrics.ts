/**
 * A small Prometheus text-format registry. The daemon exposes a dozen series; a full client
 * library would cost more start-up time and memory on a Pi than these few lines.
 */
type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

interface Series {
  render(): string;
}

/** Label sets a counter remembers the text of; past this (label values that never repeat) each is built anew. */
const MAX_REMEMBERED_LABEL_SETS = 1000;

export class Counter implements Series {
  readonly #values = new Map<string, number>();
  /** The Prometheus text of label sets seen before, by their names and values joined: the hot paths count a few sets over and over (one per uplink). */
  readonly #texts = new Map<string, string>();
  /** The same for label sets of one label, by its name, then its value. */
  readonly #singleTexts = new Map<string, Map<string, string>>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    let single: string | undefined;
    let count = 0;
    for (const name in labels) {
      single = name;
      if (++count > 1) break;
    }
    if (count === 1) {
      // One label (most counters): found by its name and value, strings the callers mostly hold as
      // constants, without joining them into a new string first (~150 ns a call otherwise).
      let byValue = this.#singleTexts.get(single!);
      if (!byValue) this.#singleTexts.set(single!, (byValue = new Map()));
      const value = labels[single!]!;
      let key = byValue.get(value);
      if (key === undefined) {
        key = labelText(labels);
        if (byValue.size < MAX_REMEMBERED_LABEL_SETS) byValue.set(value, key);
      }
      this.incKey(key, by);
      return;
    }
    let id = '';
    for (const name in labels) id += `${name}\0${labels[name]}\0`;
    let key = this.#texts.get(id);
    if (key === undefined) {
      key = labelText(labels);
      if (this.#texts.size < MAX_REMEMBERED_LABEL_SETS) this.#texts.set(id, key);
    }
    this.incKey(key, by);
  }

  /** The hot-path form: `key` from `Counter.key(labels)`, computed once by the caller. */
  incKey(key: string, by = 1): void {
    this.#values.set(key, (this.#values.get(key) ?? 0) + by);
  }

  static key(labels: Labels): string {
    return labelText(labels);
  }

  get(labels: Labels = {}): number {
    return this.#values.get(labelText(labels)) ?? 0;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    if (this.#values.size === 0) lines.push(`${this.name} 0`);
    for (const [key, value] of this.#values) lines.push(`${this.name}${key} ${value}`);
    return lines.join('\n');
  }
}

/**
 * A value read when scraped, so nothing has to keep it up to date. `type` is `counter` for totals
 * that some other object already counts (states accepted since start), else `gauge`.
 */
export class Gauge implements Series {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly read: () => number | Array<[Labels, number]>,
    readonly type: 'gauge' | 'counter' = 'gauge',
  ) {}

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`];
    const value = this.read();
    if (typeof value === 'number') lines.push(`${this.name} ${value}`);
    else for (const [labels, v] of value) lines.push(`${this.name}${labelText(labels)} ${v}`);
    return lines.join('\n');
  }
}

export class Histogram implements Series {
  readonly #counts: number[];
  #sum = 0;
  #count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
  ) {
    this.#counts = buckets.map(() => 0);
  }

  observe(value: number): void {
    this.#sum += value;
    this.#count++;
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) this.#counts[i]!++;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.#counts[i]}`));
    lines.push(`${this.name}_bucket{le="+Inf"} ${this.#count}`, `${this.name}_sum ${this.#sum}`, `${this.name}_count ${this.#count}`);
    return lines.join('\n');
  }
}

export class MetricsRegistry {
  readonly #series: Series[] = [];

  counter(name: string, help: string): Counter {
    return this.#add(new Counter(name, help));
  }

  gauge(name: string, help: string, read: Gauge['read']): Gauge {
    return this.#add(new Gauge(name, help, read));
  }

  /** A counter whose value another object keeps (read at scrape time). */
  counterFrom(name: string, help: string, read: Gauge['read']): Gauge {
    return this.#add(new Gauge(name, help, read, 'counter'));
  }

  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.#add(new Histogram(name, help, buckets));
  }

  #add<S extends Series>(series: S): S {
    this.#series.push(series);
    return series;
  }

  /** Names of every registered series (docs/operations.md lists them all; a test checks). */
  names(): string[] {
    return this.#series.map((s) => (s as unknown as { name: string }).name);
  }

  render(): string {
    return this.#series.map((s) => s.render()).join('\n') + '\n';
  }
}
