import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const gitAccountHandlers = defineHandlers({
  'git.authorize': ({ caller, params, query, services, request }) =>
    services.gitAccounts.authorize(caller.id, params.provider, query.returnPath, new URL(request.url).origin),
  'git.callback': async ({ params, query, services, request }) => {
    const token = request.headers.get('authorization')?.match(/^Bearer\s+(\S+)\s*$/i)?.[1]
    const presenting = token ? await services.users.authenticate(token) : null
    const location = await services.gitAccounts.callback(params.provider, query, presenting?.id ?? null)
    return new Response(null, { status: 302, headers: { location, 'cache-control': 'no-store' } })
  },
  'git.accounts.list': (ctx) =>
    listPage('git.accounts.list', 'accounts', ctx, (page, filter) =>
      ctx.services.gitAccounts.list(ctx.caller.id, page, filter),
    ),
  'git.accounts.get': ({ caller, params, services }) => services.gitAccounts.get(caller.id, params.id),
  'git.accounts.delete': async ({ caller, params, services }) => {
    await services.gitAccounts.remove(caller.id, params.id)
  },
})
