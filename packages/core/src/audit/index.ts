/** audit/: the audit log (entries, retention, counted refusals) and the request scope it reads the actor from. */
export { AuditLog, type AuditDetails, type AuditInput, type AuditLogOptions, type EgressRefusal } from './log.js'
export { currentRequest, inRequest, type RequestScope } from './context.js'
