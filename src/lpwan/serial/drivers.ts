import type { ModemDriver, ModemType } from './modem.js';
import { Rn2483Driver } from './rn2483.js';
import { Rak3172Driver } from './rak3172.js';
import { Rak811Driver } from './rak811.js';

export const MODEM_TYPES: readonly ModemType[] = ['rn2483', 'rak3172', 'rak811'];

/** Serial settings that work out of the box for each modem (the config may override the baud rate). */
export const DEFAULT_BAUD_RATE: Record<ModemType, number> = { rn2483: 57600, rak3172: 115200, rak811: 115200 };

export function createModemDriver(type: ModemType): ModemDriver {
  switch (type) {
    case 'rn2483':
      return new Rn2483Driver();
    case 'rak3172':
      return new Rak3172Driver();
    case 'rak811':
      return new Rak811Driver();
  }
}
