/**
 * LoRa time on air (Semtech's SX127x formula: preamble 8, explicit header, CR 4/5), used to bound
 * how long a modem may take to report the end of a transmission.
 */
export function loraAirtimeMs(payloadBytes: number, spreadingFactor: number, bandwidthKhz: number, crc = false): number {
  const symbolMs = 2 ** spreadingFactor / bandwidthKhz;
  const lowDataRateOptimise = symbolMs > 16 ? 1 : 0;
  const bits = 8 * payloadBytes - 4 * spreadingFactor + 28 + (crc ? 16 : 0);
  const payloadSymbols = 8 + Math.max(Math.ceil(bits / (4 * (spreadingFactor - 2 * lowDataRateOptimise))) * 5, 0);
  return (8 + 4.25) * symbolMs + payloadSymbols * symbolMs;
}
