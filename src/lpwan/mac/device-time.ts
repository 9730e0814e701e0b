/** CID of DeviceTimeReq / DeviceTimeAns (LoRaWAN 1.0.3). */
export const DEVICE_TIME = 0x0d;

/** 1980-01-06T00:00:00Z, the GPS epoch, in Unix ms. */
const GPS_EPOCH_MS = 315_964_800_000;
/**
 * GPS time runs ahead of UTC by the leap seconds since 1980: 18 since 2017-01-01, and none
 * announced since (a new one would be a change here).
 */
const GPS_LEAP_SECONDS = 18;

/** GPS time (seconds since the GPS epoch, with leap seconds) of a Unix time in ms. */
export function gpsTimeSeconds(unixMs: number): number {
  return (unixMs - GPS_EPOCH_MS) / 1000 + GPS_LEAP_SECONDS;
}

/**
 * DeviceTimeAns: the GPS time at which the uplink carrying the request was received, as 32-bit
 * seconds (little-endian) and a fraction in 1/256 s.
 */
export function deviceTimeAnswer(receivedAtMs: number): Buffer {
  const gps = gpsTimeSeconds(receivedAtMs);
  const seconds = Math.floor(gps);
  const out = Buffer.alloc(6);
  out[0] = DEVICE_TIME;
  out.writeUInt32LE(seconds >>> 0, 1);
  out[5] = Math.min(255, Math.floor((gps - seconds) * 256));
  return out;
}
