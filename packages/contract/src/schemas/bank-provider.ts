import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Timestamp } from './common.js'

/** Where the connect widget runs: the provider's `sandbox`, `development` or `production`. */
export const BankEnvironment = v.picklist(['sandbox', 'development', 'production'])

/** Data products the widget asks the user to grant (Teller's names). */
export const BankProduct = v.picklist(['verify', 'balance', 'transactions', 'identity'])

/** How many accounts the user picks in the widget. */
export const BankSelectAccount = v.picklist(['disabled', 'single', 'multiple'])

const ApplicationId = v.pipe(
  v.string(),
  v.regex(
    /^[A-Za-z0-9_-]{1,100}$/,
    'must be the application id from the provider dashboard (letters, digits, _ and -)',
  ),
)

/** Body of `POST /v1/integrations/bankprovider/config`: what the dashboard's connect widget is started with. */
export const SetBankProviderConfig = v.strictObject({
  /** The application id the provider issued (e.g. `app_nu123…`). */
  application_id: ApplicationId,
  environment: BankEnvironment,
  /** Default `['balance', 'transactions']`. */
  products: v.optional(v.pipe(v.array(BankProduct), minLength(1, 'needs at least one product'), maxLength(4))),
  /** Default `multiple`. */
  select_account: v.optional(BankSelectAccount),
})

/** The caller's connect-widget settings (nothing secret: the widget runs in the browser with them). */
export const BankProviderConfig = v.object({
  application_id: v.string(),
  environment: BankEnvironment,
  products: v.array(BankProduct),
  select_account: BankSelectAccount,
  updated_at: Timestamp,
})

const Text = (max: number) => v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(max))

/**
 * Body of `POST /v1/integrations/bankprovider/callback`: the connect widget's success
 * payload as the widget hands it over (`onSuccess`), in the provider's own camelCase shape.
 * The nested objects are the provider's and may carry more fields; they are ignored.
 */
export const BankConnectPayload = v.strictObject({
  accessToken: v.pipe(Text(512), v.regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')),
  enrollment: v.object({
    id: Text(200),
    institution: v.object({ name: Text(200) }),
  }),
  user: v.object({ id: Text(200) }),
  /** Present when the widget was started with a nonce; kept for reference, not verified (see the route's description). */
  signatures: v.optional(v.pipe(v.array(Text(2048)), maxLength(10))),
})

/** The `bankprovider` integration's config fields: all the connect flow's (a PATCH cannot change them). */
export const BANK_MANAGED_FIELDS = [
  'access_token',
  'enrollment_id',
  'institution',
  'user_id',
  'application_id',
  'environment',
  'accounts',
  'verified_at',
] as const

export type SetBankProviderConfig = v.InferOutput<typeof SetBankProviderConfig>
export type BankProviderConfig = v.InferOutput<typeof BankProviderConfig>
export type BankConnectPayload = v.InferOutput<typeof BankConnectPayload>
