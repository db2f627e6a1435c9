/** audit/: the audit log (entries, retention, failed authentication) and the request scope it reads the actor from. */
export { AuditLog, type AuditDetails, type AuditInput, type AuditLogOptions } from './log.js'
export { currentRequest, inRequest, type RequestScope } from './context.js'
