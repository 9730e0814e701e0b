import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout for journald. Tokens never reach the log: they are redacted wherever a
 * field of that name appears, and MQTT passwords are not logged at all.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { name: 'outpost' },
      redact: { paths: ['token', '*.token', 'password', '*.password', 'authorization', '*.authorization'], censor: '[redacted]' },
    },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
