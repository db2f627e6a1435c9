/** usage/: the usage ledger, the report read from it and the monthly spending limits checked against it. */
export {
  Budgets,
  budgetError,
  createUsage,
  nextMonthStart,
  type BudgetExceeded,
  type MonthlyLimit,
  type Usage,
} from './budgets.js'
export {
  UsageLedger,
  type ModelCallUsage,
  type TaskUsage,
  type UsageLedgerOptions,
  type UsageSubject,
} from './ledger.js'
export { usageReport } from './report.js'
export { settleUsage } from './task-end.js'
