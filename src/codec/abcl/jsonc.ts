// JSON with comments (docs/codecs.md, "Writing an ABCL document"), on top of Microsoft's jsonc-parser scanner/parser.
import { parseTree, printParseErrorCode, type Node, type ParseError } from 'jsonc-parser';
import { type JsonValue, setMember } from '../../core/json.js';

export type JsoncParseResult = { ok: true; value: JsonValue } | { ok: false; error: string };

const ERROR_TEXT: Record<string, string> = {
  InvalidSymbol: 'unexpected character',
  InvalidNumberFormat: 'invalid number',
  PropertyNameExpected: 'expected a quoted member name',
  ValueExpected: 'expected a value',
  ColonExpected: "expected ':'",
  CommaExpected: "expected ',' or a closing bracket",
  CloseBraceExpected: "expected ',' or '}'",
  CloseBracketExpected: "expected ',' or ']'",
  EndOfFileExpected: 'unexpected text after the document',
  InvalidCommentToken: 'invalid comment',
  UnexpectedEndOfComment: "unterminated '/*' comment",
  UnexpectedEndOfString: 'unterminated string',
  UnexpectedEndOfNumber: 'incomplete number',
  InvalidUnicode: 'invalid unicode escape',
  InvalidEscapeCharacter: 'invalid escape character',
  InvalidCharacter: 'control character in string',
};

/** 1-based line and column (UTF-16 code units); a line ends at \n, \r\n or \r. */
export function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || (c === 0x0d && text.charCodeAt(i + 1) !== 0x0a)) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

function nodeToValue(node: Node): JsonValue {
  switch (node.type) {
    case 'object': {
      const result: { [key: string]: JsonValue } = {};
      for (const property of node.children ?? []) {
        const [keyNode, valueNode] = property.children ?? [];
        if (keyNode === undefined || valueNode === undefined) continue;
        // Last occurrence wins, as in JSON.parse: delete first so the order follows it too.
        const key = keyNode.value as string;
        delete result[key];
        setMember(result, key, nodeToValue(valueNode));
      }
      return result;
    }
    case 'array':
      return (node.children ?? []).map(nodeToValue);
    default:
      return node.value as JsonValue;
  }
}

export function parseJsonc(source: string): JsoncParseResult {
  // A leading byte order mark is ignored; offsets below are in the text without it.
  const text = source.charCodeAt(0) === 0xfeff ? source.slice(1) : source;
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { allowTrailingComma: false, disallowComments: false, allowEmptyContent: false });
  const first = errors[0];
  if (first !== undefined || tree === undefined) {
    const offset = first?.offset ?? 0;
    const code = first === undefined ? 'ValueExpected' : printParseErrorCode(first.error);
    const { line, column } = lineAndColumn(text, offset);
    return { ok: false, error: `syntax error at line ${line}, column ${column}: ${ERROR_TEXT[code] ?? code}` };
  }
  return { ok: true, value: nodeToValue(tree) };
}
