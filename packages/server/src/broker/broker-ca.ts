import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { chmod, link, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { isIP } from 'node:net'
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import forge from 'node-forge'

/**
 * The deployment's broker certificate authority: containers trust `certPem`, and the
 * egress proxy presents a leaf certificate it signs for every host whose requests it
 * must read (to add a brokered secret or a Git token to their headers).
 */
export interface BrokerCa {
  /** The CA certificate, PEM: what containers add to their trust stores. */
  certPem: string
  /** The CA's private key, PEM: never leaves the server. */
  keyPem: string
  /** A leaf certificate for `host` (a DNS name or an IP address), signed by this CA; cached per host until near its end. */
  leafFor(host: string): { certPem: string; keyPem: string }
}

const CA_FILE = 'ca.pem'
const KEY_FILE = 'ca-key.pem'
const HOUR = 3_600_000
// Leaves are short-lived: a stolen one (it never leaves the server) is useless within days.
const LEAF_LIFETIME = 48 * HOUR
// A cached leaf is minted again once less than this is left of it.
const LEAF_RENEW_BEFORE = 12 * HOUR
// Some clocks inside containers lag the host's: certificates start an hour in the past.
const BACKDATE = HOUR

/**
 * The broker CA of a deployment, from `<dir>/ca.pem` (public, 0644) and
 * `<dir>/ca-key.pem` (0600), made on first use (RSA 2048, ten years) and reused after, so
 * containers keep trusting the proxy across restarts.
 *
 * @example
 * ```ts
 * const ca = await loadOrCreateBrokerCa('/var/lib/berth/broker')
 * const { certPem, keyPem } = ca.leafFor('api.example.com')
 * ```
 */
export async function loadOrCreateBrokerCa(dir: string): Promise<BrokerCa> {
  const certPath = join(dir, CA_FILE)
  const keyPath = join(dir, KEY_FILE)
  const existing = await readPair(certPath, keyPath)
  if (existing) return brokerCa(existing.certPem, existing.keyPem)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const made = createCaPair()
  // The key is claimed with a hard link (which fails when the file exists), so of two
  // servers starting on one directory exactly one makes the CA and the other reads it.
  const keyTmp = await writeTemp(keyPath, made.keyPem, 0o600)
  try {
    await link(keyTmp, keyPath)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    const theirs = await waitForPair(certPath, keyPath)
    return brokerCa(theirs.certPem, theirs.keyPem)
  } finally {
    await rm(keyTmp, { force: true })
  }
  await rename(await writeTemp(certPath, made.certPem, 0o644), certPath)
  return brokerCa(made.certPem, made.keyPem)
}

async function waitForPair(certPath: string, keyPath: string): Promise<{ certPem: string; keyPem: string }> {
  for (let i = 0; i < 100; i++) {
    const pair = await readPair(certPath, keyPath)
    if (pair) return pair
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`${keyPath} exists without ${certPath}: remove the key to make a new broker CA`)
}

async function readPair(certPath: string, keyPath: string): Promise<{ certPem: string; keyPem: string } | null> {
  try {
    const [certPem, keyPem] = await Promise.all([readFile(certPath, 'utf8'), readFile(keyPath, 'utf8')])
    return { certPem, keyPem }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
}

async function writeTemp(path: string, text: string, mode: number): Promise<string> {
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`
  await writeFile(tmp, text, { mode })
  // writeFile's mode is filtered by the umask; the files' modes are part of the contract.
  await chmod(tmp, mode)
  return tmp
}

function serialNumber(): string {
  // Positive (high bit clear) and unique enough that no two leaves of one CA collide.
  const bytes = randomBytes(16)
  bytes[0] = bytes[0]! & 0x7f
  return bytes.toString('hex')
}

// Node's own RSA key generation: node-forge's is pure JavaScript and many times slower.
function rsaKeys(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey } {
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const privateKey = forge.pki.privateKeyFromPem(pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString())
  const publicKey = forge.pki.publicKeyFromPem(pair.publicKey.export({ type: 'spki', format: 'pem' }).toString())
  return { privateKey, publicKey }
}

function createCaPair(): { certPem: string; keyPem: string } {
  const keys = rsaKeys()
  const cert = forge.pki.createCertificate()
  cert.publicKey = keys.publicKey
  cert.serialNumber = serialNumber()
  const now = Date.now()
  cert.validity.notBefore = new Date(now - BACKDATE)
  cert.validity.notAfter = new Date(now + 10 * 365 * 24 * HOUR)
  const subject = [
    { name: 'commonName', value: `Berth egress broker CA ${randomBytes(4).toString('hex')}` },
    { name: 'organizationName', value: 'Berth' },
  ]
  cert.setSubject(subject)
  cert.setIssuer(subject)
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ])
  cert.sign(keys.privateKey, forge.md.sha256.create())
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) }
}

function brokerCa(certPem: string, keyPem: string): BrokerCa {
  const caCert = forge.pki.certificateFromPem(certPem)
  const caKey = forge.pki.privateKeyFromPem(keyPem)
  const caKeyId = caCert.generateSubjectKeyIdentifier().getBytes()
  // One key pair for every leaf of this process (what interception proxies commonly do):
  // signing a certificate is cheap, generating an RSA key is not.
  const leafKeys = rsaKeys()
  const leafKeyPem = forge.pki.privateKeyToPem(leafKeys.privateKey)
  // Bounded: a task could otherwise grow it with one name per request.
  const cache = new LRUCache<string, { certPem: string; keyPem: string; renewAt: number }>({ max: 1000 })

  function mint(host: string): { certPem: string; keyPem: string; renewAt: number } {
    const cert = forge.pki.createCertificate()
    cert.publicKey = leafKeys.publicKey
    cert.serialNumber = serialNumber()
    const now = Date.now()
    cert.validity.notBefore = new Date(now - BACKDATE)
    cert.validity.notAfter = new Date(now + LEAF_LIFETIME)
    cert.setSubject([{ name: 'commonName', value: host }])
    cert.setIssuer(caCert.subject.attributes)
    const altName = isIP(host) ? { type: 7, ip: host } : { type: 2, value: host }
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [altName] },
      { name: 'subjectKeyIdentifier' },
      { name: 'authorityKeyIdentifier', keyIdentifier: caKeyId },
    ])
    cert.sign(caKey, forge.md.sha256.create())
    return {
      certPem: forge.pki.certificateToPem(cert),
      keyPem: leafKeyPem,
      renewAt: now + LEAF_LIFETIME - LEAF_RENEW_BEFORE,
    }
  }

  return {
    certPem,
    keyPem,
    leafFor(host) {
      const name = host.toLowerCase()
      let leaf = cache.get(name)
      if (!leaf || leaf.renewAt <= Date.now()) {
        leaf = mint(name)
        cache.set(name, leaf)
      }
      return { certPem: leaf.certPem, keyPem: leaf.keyPem }
    },
  }
}
