/** The server's user in the image: not root, and not the agent's 1000 either. */
export const SERVER_UID = 10001
export const SERVER_GID = 10001
/** The port the server listens on in the image (`PORT`). */
export const SERVER_PORT = 3000

/**
 * The Dockerfile of the two images, from a build context holding `rootfs.tar` (the host
 * recipe), `runner/` (the runner bundle), `app/` (the deployed server), `etc/` and `data/`.
 * `FROM scratch` and local files only: nothing is pulled. The server runs plain JavaScript
 * (`node dist/main.js`); the agent image alone holds the runner.
 */
export function dockerfile(o: { version: string; recipe: string; agent: string }): string {
  const labels = `LABEL org.opencontainers.image.version="${o.version}" berth.image.recipe="${o.recipe}"`
  // Exit 0 only when GET /health answers 200 (the engine, store and Redis all reachable).
  const probe =
    "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
  return `# Written by examples/standalone-server/image/build.ts; built with --target agent, then --target server.
# Both images share the root filesystem layer; only the agent carries the runner.
FROM scratch AS base
ADD rootfs.tar /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /

FROM base AS agent
COPY runner /opt/berth-runner
${labels} org.opencontainers.image.title="Berth agent" berth.workdir-owner="1000:1000@/workspace"
CMD ["/bin/sh"]

FROM base AS server
COPY etc/passwd etc/group /etc/
COPY --chown=${SERVER_UID}:${SERVER_GID} data /data
COPY app /opt/berth
# The broker's sockets sit in /data/broker; task containers reach the model gateway and the
# egress proxy through them, so the server's own network is the default bridge. The host
# firewall rules of the "public" and "allowlist" policies cannot be installed from there
# (no root, no iptables, another network namespace): task containers get no network of
# their own ("none"), and BERTH_SERVER_IMAGE makes the server refuse to start with more;
# see the README, "The server image".
ENV HOST=0.0.0.0 PORT=${SERVER_PORT} NODE_ENV=production BERTH_SERVER_IMAGE=1 \\
    BERTH_DATA_DIR=/data BERTH_CACHE_DIR=/data/cache \\
    BERTH_RUNNER=image BERTH_IMAGE=${o.agent} \\
    BERTH_ENV_DEFAULT_POLICY=none BERTH_ENV_POLICIES=none
${labels} org.opencontainers.image.title="Berth server"
WORKDIR /opt/berth
USER ${SERVER_UID}:${SERVER_GID}
VOLUME /data
EXPOSE ${SERVER_PORT}
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s CMD ["node", "-e", "${probe}"]
ENTRYPOINT ["node", "dist/main.js"]
`
}
