// The `calculation` language (docs/codecs.md, "Writing an ABCL document"): a recursive-descent parser that compiles the
// expression into nested closures once, at load time. Nothing is ever handed to a JS evaluator.
//
// A compiled expression returns a finite number, or NaN when the evaluation fails (division or
// remainder by zero, any non-finite intermediate result). Every node maps a non-finite result to
// NaN, and NaN propagates through every operator and function, so one check at the end suffices
// without exceptions on the hot path.

export type CompiledExpression = (val: number) => number;

export type ExpressionParseResult = { ok: true; evaluate: CompiledExpression; usesVal: boolean } | { ok: false; error: string };

type Token =
  | { kind: 'number'; value: number; pos: number }
  | { kind: 'name'; name: string; pos: number }
  | { kind: 'op'; op: string; pos: number }
  | { kind: 'end'; pos: number };

class ExpressionSyntaxError extends Error {
  constructor(message: string, readonly position: number) {
    super(message);
  }
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

function isNameChar(c: string): boolean {
  return /[A-Za-z0-9_]/.test(c);
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      i++;
      continue;
    }
    const start = i;
    if (isDigit(c) || (c === '.' && isDigit(text[i + 1] ?? ''))) {
      let literal: string;
      if (c === '0' && (text[i + 1] === 'x' || text[i + 1] === 'X')) {
        i += 2;
        while (i < text.length && /[0-9A-Fa-f]/.test(text[i]!)) i++;
        literal = text.slice(start, i);
        if (literal.length === 2) throw new ExpressionSyntaxError('hex number without digits', start);
      } else {
        while (isDigit(text[i] ?? '')) i++;
        if (text[i] === '.') {
          i++;
          while (isDigit(text[i] ?? '')) i++;
        }
        if ((text[i] === 'e' || text[i] === 'E') && (isDigit(text[i + 1] ?? '') || ((text[i + 1] === '+' || text[i + 1] === '-') && isDigit(text[i + 2] ?? '')))) {
          i += 2;
          while (isDigit(text[i] ?? '')) i++;
        }
        literal = text.slice(start, i);
      }
      const next = text[i] ?? '';
      if (next === '.' || isNameChar(next)) throw new ExpressionSyntaxError(`malformed number "${literal}${next}"`, start);
      const value = Number(literal);
      if (!Number.isFinite(value)) throw new ExpressionSyntaxError(`number ${literal} overflows`, start);
      tokens.push({ kind: 'number', value, pos: start });
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      while (i < text.length && isNameChar(text[i]!)) i++;
      tokens.push({ kind: 'name', name: text.slice(start, i), pos: start });
      continue;
    }
    if ('+-*/%(),'.includes(c)) {
      tokens.push({ kind: 'op', op: c, pos: start });
      i++;
      continue;
    }
    throw new ExpressionSyntaxError(`unexpected character "${c}"`, start);
  }
  tokens.push({ kind: 'end', pos: text.length });
  return tokens;
}

function finite(x: number): number {
  return x - x === 0 ? x : NaN;
}

/** A parsed sub-expression; constants and `val` are marked so operators can specialise. */
interface ExpressionNode {
  evaluate: CompiledExpression;
  constant?: number;
  isVal?: boolean;
}

const node = (evaluate: CompiledExpression): ExpressionNode => ({ evaluate });

type BinaryOperator = '+' | '-' | '*' | '/' | '%';

/**
 * Builds a binary operator closure. `val op constant` is by far the most common shape in
 * published documents (`val / 10`), so it gets a closure without inner calls.
 */
function binary(op: BinaryOperator, left: ExpressionNode, right: ExpressionNode): ExpressionNode {
  if (left.constant !== undefined && right.constant !== undefined) {
    const folded = binary(op, { evaluate: () => left.constant! }, { evaluate: () => right.constant! }).evaluate(0);
    return { evaluate: () => folded, constant: Number.isNaN(folded) ? undefined : folded };
  }
  const l = left.evaluate;
  const r = right.evaluate;
  if (left.isVal && right.constant !== undefined) {
    const c = right.constant;
    switch (op) {
      case '+': return node((v) => { const x = v + c; return x - x === 0 ? x : NaN; });
      case '-': return node((v) => { const x = v - c; return x - x === 0 ? x : NaN; });
      case '*': return node((v) => { const x = v * c; return x - x === 0 ? x : NaN; });
      case '/': return node(c === 0 ? () => NaN : (v) => { const x = v / c; return x - x === 0 ? x : NaN; });
      case '%': return node(c === 0 ? () => NaN : (v) => { const x = v % c; return x - x === 0 ? x : NaN; });
    }
  }
  switch (op) {
    case '+': return node((v) => finite(l(v) + r(v)));
    case '-': return node((v) => finite(l(v) - r(v)));
    case '*': return node((v) => finite(l(v) * r(v)));
    case '/': return node((v) => { const d = r(v); return d === 0 ? NaN : finite(l(v) / d); });
    case '%': return node((v) => { const d = r(v); return d === 0 ? NaN : finite(l(v) % d); });
  }
}

/** Nearest integer with halves away from zero (`Math.round` sends −1.5 to −1). */
export function roundHalfAwayFromZero(x: number): number {
  const whole = Math.trunc(x);
  // x − trunc(x) is exact for doubles, so the comparison with 0.5 is too.
  return Math.abs(x - whole) >= 0.5 ? whole + Math.sign(x) : whole;
}

type FunctionSpec = { min: number; max: number; build: (args: CompiledExpression[]) => CompiledExpression };

const FUNCTIONS: Record<string, FunctionSpec> = {
  round: { min: 1, max: 1, build: ([a]) => (v) => roundHalfAwayFromZero(a!(v)) },
  floor: { min: 1, max: 1, build: ([a]) => (v) => Math.floor(a!(v)) },
  ceil: { min: 1, max: 1, build: ([a]) => (v) => Math.ceil(a!(v)) },
  abs: { min: 1, max: 1, build: ([a]) => (v) => Math.abs(a!(v)) },
  min: { min: 1, max: Infinity, build: (args) => (args.length === 2 ? (v) => Math.min(args[0]!(v), args[1]!(v)) : (v) => Math.min(...args.map((f) => f(v)))) },
  max: { min: 1, max: Infinity, build: (args) => (args.length === 2 ? (v) => Math.max(args[0]!(v), args[1]!(v)) : (v) => Math.max(...args.map((f) => f(v)))) },
  pow: { min: 2, max: 2, build: ([a, b]) => (v) => finite(Math.pow(a!(v), b!(v))) },
};

// Guards the recursive descent against documents like "((((…" exhausting the host stack.
const MAX_NESTING = 64;

class Parser {
  private index = 0;
  private depth = 0;
  usesVal = false;

  constructor(private readonly tokens: Token[]) {}

  private peek(): Token {
    return this.tokens[this.index]!;
  }

  private isOp(op: string): boolean {
    const t = this.peek();
    return t.kind === 'op' && t.op === op;
  }

  private expectOp(op: string): void {
    const t = this.peek();
    if (!this.isOp(op)) throw new ExpressionSyntaxError(`expected "${op}"`, t.pos);
    this.index++;
  }

  parseWhole(): CompiledExpression {
    const expression = this.parseExpression();
    const t = this.peek();
    if (t.kind !== 'end') throw new ExpressionSyntaxError('unexpected token after the expression', t.pos);
    return expression.evaluate;
  }

  private parseExpression(): ExpressionNode {
    let left = this.parseTerm();
    while (this.isOp('+') || this.isOp('-')) {
      const op = (this.tokens[this.index++] as { op: BinaryOperator }).op;
      left = binary(op, left, this.parseTerm());
    }
    return left;
  }

  private parseTerm(): ExpressionNode {
    let left = this.parseUnary();
    while (this.isOp('*') || this.isOp('/') || this.isOp('%')) {
      const op = (this.tokens[this.index++] as { op: BinaryOperator }).op;
      left = binary(op, left, this.parseUnary());
    }
    return left;
  }

  private parseUnary(): ExpressionNode {
    if (++this.depth > MAX_NESTING) throw new ExpressionSyntaxError('expression nested too deeply', this.peek().pos);
    try {
      return this.parseUnaryInner();
    } finally {
      this.depth--;
    }
  }

  private parseUnaryInner(): ExpressionNode {
    if (this.isOp('+')) {
      this.index++;
      return this.parseUnary();
    }
    if (this.isOp('-')) {
      this.index++;
      const operand = this.parseUnary();
      if (operand.constant !== undefined) {
        const negated = -operand.constant;
        return { evaluate: () => negated, constant: negated };
      }
      const f = operand.evaluate;
      return node((v) => -f(v));
    }
    return this.parsePrimary();
  }

  private parsePrimary(): ExpressionNode {
    const t = this.peek();
    if (t.kind === 'number') {
      this.index++;
      const constant = t.value;
      return { evaluate: () => constant, constant };
    }
    if (t.kind === 'op' && t.op === '(') {
      this.index++;
      const inner = this.parseExpression();
      this.expectOp(')');
      return inner;
    }
    if (t.kind === 'name') {
      this.index++;
      if (t.name === 'val') {
        this.usesVal = true;
        return { evaluate: (v) => v, isVal: true };
      }
      const fn = FUNCTIONS[t.name];
      if (fn === undefined || !Object.hasOwn(FUNCTIONS, t.name)) throw new ExpressionSyntaxError(`unknown name "${t.name}"`, t.pos);
      if (!this.isOp('(')) throw new ExpressionSyntaxError(`expected "(" after ${t.name}`, this.peek().pos);
      this.index++;
      const args: CompiledExpression[] = [];
      if (!this.isOp(')')) {
        args.push(this.parseExpression().evaluate);
        while (this.isOp(',')) {
          this.index++;
          args.push(this.parseExpression().evaluate);
        }
      }
      this.expectOp(')');
      if (args.length < fn.min || args.length > fn.max) {
        const wanted = fn.min === fn.max ? `exactly ${fn.min}` : `at least ${fn.min}`;
        throw new ExpressionSyntaxError(`${t.name} takes ${wanted} argument${fn.min === 1 ? '' : 's'}, got ${args.length}`, t.pos);
      }
      return node(fn.build(args));
    }
    if (t.kind === 'end') throw new ExpressionSyntaxError('unexpected end of expression', t.pos);
    throw new ExpressionSyntaxError(`unexpected "${t.kind === 'op' ? t.op : ''}"`, t.pos);
  }
}

export function parseExpression(text: string): ExpressionParseResult {
  try {
    const parser = new Parser(tokenize(text));
    const evaluate = parser.parseWhole();
    return { ok: true, evaluate, usesVal: parser.usesVal };
  } catch (error) {
    if (error instanceof ExpressionSyntaxError) return { ok: false, error: `${error.message} at position ${error.position + 1}` };
    throw error;
  }
}
