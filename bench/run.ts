// `npm run bench`: every benchmark in one run (HTTP, MQTT with mosquitto as the anchor, codecs),
// each printing its table and writing bench/results/<name>.json. Not part of the tests.
// Needs wrk and mosquitto (Debian packages). BENCH_ONLY=http,mqtt,codec,durability,store,sync,fleet,redecode,ops,lpwan,central picks a subset.
import { benchHttp } from './http.js';
import { benchCodecs } from './codec.js';
import { benchRedecode } from './redecode.js';
import { printTable, saveResults, type BenchRow } from './lib.js';

delete process.env.NODE_EXTRA_CA_CERTS; // adds ~120 ms to every node start; the daemons are timed

const only = new Set((process.env.BENCH_ONLY ?? 'http,mqtt,codec,durability,store,sync,fleet,redecode,ops,lpwan,central').split(','));

if (only.has('codec')) {
  const rows = await benchCodecs();
  printTable('Codecs (operations per second; ratio = codec / baseline)', rows);
  console.log(`written: ${saveResults('codec', rows)}`);
}
if (only.has('redecode')) {
  const rows = await benchRedecode();
  printTable('Re-decode (kept raw uplinks re-decoded and their states replaced; median of 3 alternating rounds)', rows);
  console.log(`written: ${saveResults('redecode', rows)}`);
}
if (only.has('http')) {
  const rows = await benchHttp();
  printTable('HTTP', rows);
  console.log(`written: ${saveResults('http', rows)}`);
}
if (only.has('mqtt')) {
  const { benchMqtt, formatMqttTable } = await import('./mqtt.js');
  const rows = await benchMqtt();
  console.log('\nMQTT\n');
  console.log(formatMqttTable(rows));
  console.log(`written: ${saveResults('mqtt', rows as unknown as BenchRow[])}`);
}
if (only.has('durability')) {
  const { benchDurability } = await import('./durability.js');
  const rows = await benchDurability();
  printTable('Durability: store.synchronous normal vs full, both with group commit (ratios from one run)', rows);
  console.log(`written: ${saveResults('durability', rows)}`);
}
if (only.has('store')) {
  const { benchStore } = await import('./store.js');
  const rows = await benchStore();
  printTable('Store: start-up integrity check', rows);
  console.log(`written: ${saveResults('store', rows)}`);
}
if (only.has('sync')) {
  const { benchSync } = await import('./sync.js');
  const rows = await benchSync();
  printTable('Upstream sync: outbox drain to mosquitto on loopback, live ingest while draining', rows);
  console.log(`written: ${saveResults('sync', rows)}`);
}
if (only.has('fleet')) {
  const { benchFleet } = await import('./fleet.js');
  const rows = await benchFleet();
  printTable('Fleet: managed devices from the central to a gateway (compiled central and gateway on loopback)', rows);
  console.log(`written: ${saveResults('fleet', rows)}`);
}
if (only.has('ops')) {
  const { benchOps } = await import('./ops.js');
  const rows = await benchOps();
  printTable('Operations: watchdog notification cost, online backup', rows);
  console.log(`written: ${saveResults('ops', rows)}`);
}
if (only.has('central')) {
  const { benchCentral } = await import('./central.js');
  const rows = await benchCentral();
  printTable('Central: QoS 1 states/s, one node on SQLite vs one, two and three nodes on PostgreSQL + Redis (all on this machine)', rows);
  console.log(`written: ${saveResults('central', rows)}`);
  const { benchCentralHistory } = await import('./central-history.js');
  const history = await benchCentralHistory();
  printTable("Central: a year of history in PostgreSQL, one asset's pages through a node's HTTP API", history);
  console.log(`written: ${saveResults('central-history', history)}`);
}
if (only.has('lpwan')) {
  const { benchLpwan } = await import('./lpwan.js');
  const rows = await benchLpwan();
  printTable('LPWAN (packet forwarder simulator on loopback, compiled daemon)', rows);
  console.log(`written: ${saveResults('lpwan', rows)}`);
}
