/** records/: owner-scoped storage shared by every service — the collection with paging, secondary indexes, named and profile-scoped records. */
export { OwnedCollection, paginate, type OwnedRecord, type Page, type Paged } from './collection.js'
export { INDEXES, indexEntryFor, term, type IndexSpec, type IndexedRecord } from './indexes.js'
export { NamedScopedService, pickDefined, type NamedScopedKind, type NamedScopedRecord } from './named.js'
export { resolveScope, assertOwnProfiles, appliesTo, type Scoped } from './scope.js'
