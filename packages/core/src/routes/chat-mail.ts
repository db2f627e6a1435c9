import type { ConnectType } from '@berth/contract'
import { listPage } from './paging.js'
import { defineHandlers, type HandlerOf } from '../route.js'

function authorize<T extends ConnectType>(type: T): HandlerOf<`integrations.${T}.authorize`> {
  return ({ caller, query, services, request }) =>
    services.chatMail.authorize(caller.id, type, query.returnPath, new URL(request.url).origin)
}

function callback<T extends ConnectType>(type: T): HandlerOf<`integrations.${T}.callback`> {
  return async ({ query, services, request }) => {
    const token = request.headers.get('authorization')?.match(/^Bearer\s+(\S+)\s*$/i)?.[1]
    const presenting = token ? await services.users.authenticate(token) : null
    const location = await services.chatMail.callback(type, query, presenting?.id ?? null)
    return new Response(null, { status: 302, headers: { location, 'cache-control': 'no-store' } })
  }
}

export const chatMailHandlers = defineHandlers({
  'integrations.chatprovider.authorize': authorize('chatprovider'),
  'integrations.mailprovider.authorize': authorize('mailprovider'),
  'integrations.chatprovider.callback': callback('chatprovider'),
  'integrations.mailprovider.callback': callback('mailprovider'),
  'integrations.chatprovider.events': ({ services, request }) => services.chatEvents.receive(request),
  'integrations.events': async (ctx) => {
    const { caller, params, services } = ctx
    await services.integrations.records.get(caller.id, params.id)
    return listPage('integrations.events', 'events', ctx, (page) =>
      services.chatEvents.list(caller.id, params.id, page),
    )
  },
})
