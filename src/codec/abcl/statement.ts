// The part of statement compiling that sense and actuate share (docs/codecs.md, "Writing an ABCL document").
import { indexPath, type LoadProblems } from './problems.js';
import { checkComment } from './selector.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../../core/json.js';

/**
 * Handles what every element of a statement block may be before it is a statement: a nested
 * block is walked, each child handed to `compileChild` with its index path; anything but an
 * object is an error; a comment-only object is checked. Returns the element when it is a
 * statement object for the caller to compile, otherwise undefined.
 */
export function statementObject(
  element: JsonValue,
  path: string,
  problems: LoadProblems,
  compileChild: (child: JsonValue, childPath: string) => void,
): JsonObject | undefined {
  if (Array.isArray(element)) {
    element.forEach((child, index) => compileChild(child, indexPath(path, index)));
    return undefined;
  }
  if (!isJsonObject(element)) {
    problems.error(path, `must be a statement object or a nested block, not ${element === null ? 'null' : typeof element}`);
    return undefined;
  }
  const keys = Object.keys(element);
  if (keys.length === 1 && keys[0] === 'comment') {
    checkComment(element, path, problems);
    return undefined;
  }
  return element;
}
