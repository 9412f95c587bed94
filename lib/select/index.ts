/**
 * Selecting items: the filter's shape (`Where`), its text form (`parseWhere`, `formatWhere`),
 * the check of a `Where` built in code (`checkWhere`) and its evaluation against one item
 * (`decide`, `matches`). Pure: no I/O. The listings, the export and the report apply it
 * (lib/log/read/selected.ts).
 */
export * from './where.ts';
export { parseWhere } from './parse.ts';
export { formatWhere } from './format.ts';
export { checkWhere } from './check.ts';
export { decide, matches } from './evaluate.ts';
export { needsOf, subjectOfState, tagsOfRows, type Needs, type Subject } from './subject.ts';
export { WhereSyntaxError } from './syntax-error.ts';
