// Shared bench plumbing: start the compiled daemon, read RSS/CPU from /proc, print and save tables.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
export const RESULTS_DIR = join(BENCH_DIR, 'results');

export interface BenchRow {
  name: string;
  [metric: string]: string | number | null;
}

/** Resident set size of a process in bytes, from /proc. */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** User + system CPU time of a process in microseconds, from /proc/<pid>/stat. */
export function cpuMicros(pid: number): number {
  const { user, system } = cpuTimes(pid);
  return user + system;
}

/** User and system CPU time of a process in microseconds, apart (system time is mostly syscalls: disk and sockets). */
export function cpuTimes(pid: number): { user: number; system: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // USER_HZ is 100 on Linux: a tick is 10 000 µs.
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}

export function printTable(title: string, rows: BenchRow[]): void {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : v === null || v === undefined ? '-' : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => '| ' + vals.map((v, i) => v.padEnd(widths[i]!)).join(' | ') + ' |';
  console.log(`\n${title}\n`);
  console.log(line(columns));
  console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  for (const r of rows) console.log(line(columns.map((c) => cell(r[c]))));
}

export function saveResults(name: string, rows: BenchRow[], extra: Record<string, unknown> = {}): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.json`);
  writeFileSync(path, JSON.stringify({ at: new Date().toISOString(), node: process.version, rows, ...extra }, null, 2));
  return path;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
