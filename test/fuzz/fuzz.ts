// `npm run fuzz`: every fuzz target with FUZZ_COUNT inputs (default 100 000) in-process, then
// FUZZ_SOCKET_COUNT requests (default FUZZ_COUNT / 50) over HTTP to the compiled daemon, then
// FUZZ_COUNT raw MQTT packets (random and mutated, before and after CONNECT) to its MQTT listener,
// then FUZZ_COUNT packet forwarder datagrams (stat/rxpk JSON, PULL_DATA, TX_ACK) to its UDP port,
// then FUZZ_COUNT / 5 Basics Station messages from ten registered stations to its WebSocket door.
// FUZZ_SEED (default: random, printed) and FUZZ_ONLY=<substring,…> / FUZZ_START replay a finding.
import { fuzzInProcess, fuzzOverSockets, type TargetReport } from './runner.js';
import { fuzzMqttPackets } from '../mqtt/packet-fuzz.js';
import { fuzzGwmpDatagrams } from './gwmp-socket.js';
import { fuzzStationMessages } from './bs-socket.js';

const env = process.env;
const count = Number(env.FUZZ_COUNT ?? 100_000);
const seed = Number(env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const only = env.FUZZ_ONLY ? env.FUZZ_ONLY.split(',') : undefined;
const start = Number(env.FUZZ_START ?? 0);
const socketCount = Number(env.FUZZ_SOCKET_COUNT ?? Math.max(100, Math.floor(count / 50)));
const log = (line: string) => console.log(line);

console.log(`fuzz: ${count} inputs per target, seed ${seed}${only ? `, only ${only.join(',')}` : ''}`);
const reports: TargetReport[] = await fuzzInProcess({ count, seed, only, start, log });
if (!only || only.some((s) => 'http-socket'.includes(s))) reports.push(await fuzzOverSockets({ count: socketCount, seed, log }));
if (!only || only.some((s) => 'mqtt-socket'.includes(s))) reports.push(await fuzzMqttPackets({ count, seed, log }));
if (!only || only.some((s) => 'gwmp-socket'.includes(s))) reports.push(await fuzzGwmpDatagrams({ count, seed, log }));
// Stations are rate limited (200 messages/s each): a fifth of the count keeps the run short.
if (!only || only.some((s) => 'bs-socket'.includes(s))) reports.push(await fuzzStationMessages({ count: Math.max(1000, Math.floor(count / 5)), seed, log }));

console.log('\n| target | inputs | inputs/s | accepted | refused (4xx) | slowest batch of 16 / request, ms | peak RSS MB | findings |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of reports) {
  console.log(`| ${r.target} | ${r.inputs} | ${r.perSecond.toFixed(0)} | ${r.accepted} | ${r.refused} | ${r.slowestMs.toFixed(1)} | ${r.peakRssMb.toFixed(0)} | ${r.findings.length} |`);
}
const findings = reports.flatMap((r) => r.findings);
for (const f of findings.slice(0, 20)) console.log(`FINDING ${f.target} #${f.index}: ${f.error}`);
process.exit(findings.length > 0 ? 1 : 0);
