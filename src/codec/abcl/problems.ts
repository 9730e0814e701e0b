// Load-time messages: each starts with the JSON path of the offending element (docs/codecs.md, "Writing an ABCL document").

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function memberPath(base: string, name: string): string {
  const step = IDENTIFIER.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`;
  if (base === '') return step.startsWith('.') ? name : step;
  return base + step;
}

export function indexPath(base: string, index: number): string {
  return `${base}[${index}]`;
}

export class LoadProblems {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];

  error(path: string, message: string): void {
    this.errors.push(path === '' ? message : `${path} ${message}`);
  }

  warning(path: string, message: string): void {
    this.warnings.push(path === '' ? message : `${path} ${message}`);
  }
}
