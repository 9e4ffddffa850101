/**
 * One-line mutants of lua/, the slips a refactor makes, for the mutation
 * tests (`npm run test:mutants`, test/model/mutate.ts): each replaces, in
 * one file, the one line whose text (trimmed) is `original` by
 * `replacement`, in a scratch copy of lua/. A mutant marked `equivalent`
 * behaves as the original everywhere the tests can reach, for the reason
 * given; the score leaves it out.
 */

export type MutantClass =
  | 'missed wake-up'
  | 'legacy and bridge wake-up'
  | 'queue heartbeat'
  | 'fence'
  | 'fenced read'
  | 'keys bound'
  | 'layout detection'
  | 'renewal budget'
  | 'abandon'
  | 'boundary'
  | 'dropped condition'
  | 'wrong field'
  | 'wrong value';

export interface Mutant {
  readonly id: string;
  /** The file under lua/. */
  readonly file: string;
  readonly original: string;
  readonly replacement: string;
  readonly class: MutantClass;
  /** Why it cannot be told from the original, if it cannot. */
  readonly equivalent?: string;
  /** Why the model checker cannot reach it (the script suites must): it runs no such operation. */
  readonly outsideModel?: string;
}

const INSPECT = 'the model runs no inspect';
const ONE_LOCK = 'the model renews one lock per call: the budget never ends one';
const OLD_LAYOUTS = 'the model starts from no lock, or one of this layout';
const TWO_ACQUIRES = 'the model has one acquire per owner at a time';

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'release-wakes-only-when-free',
    file: 'includes/release-body.lua',
    original: 'if live <= 1 then',
    replacement: 'if live == 0 then',
    class: 'missed wake-up',
  },
  {
    id: 'wake-message-names-no-upgrader',
    file: 'includes/state.lua',
    original: "if u and (deadlineOf(u) or 0) > now then return mode .. ':' .. u end",
    replacement: "if u and (deadlineOf(u) or 0) > now then return mode .. ':' end",
    class: 'missed wake-up',
  },
  {
    id: 'wake-message-names-head-with-a-holder-left',
    file: 'includes/state.lua',
    original: 'if live == 0 then',
    replacement: 'if live <= 1 then',
    class: 'missed wake-up',
    equivalent:
      'with one holder left no waiting writer but an upgrader (named before) can get in, so naming the head wakes fewer writers and misses none: the checker finds nothing in any configuration without a cap on states',
  },
  {
    id: 'force-release-wakes-nobody',
    file: 'force-release.lua',
    original: "redis.call('SPUBLISH', channel, 'release')",
    replacement: "redis.call('TIME')",
    class: 'missed wake-up',
    outsideModel: 'the model runs no force-release',
  },
  {
    id: 'peer-wake-silent',
    file: 'includes/legacy.lua',
    original: "if peerChannel ~= '' then rcall('SPUBLISH', peerChannel, message) end",
    replacement: "if peerChannel == '' then rcall('SPUBLISH', peerChannel, message) end",
    class: 'legacy and bridge wake-up',
  },
  {
    id: 'legacy-release-no-peer-channel',
    file: 'legacy-release.lua',
    original: 'local peerChannel = ARGV[2]',
    replacement: "local peerChannel = ''",
    class: 'legacy and bridge wake-up',
  },
  {
    id: 'legacy-abandon-no-peer-channel',
    file: 'legacy-abandon.lua',
    original: 'local peerChannel = ARGV[3]',
    replacement: "local peerChannel = ''",
    class: 'legacy and bridge wake-up',
  },
  {
    id: 'abandon-wakes-no-peer',
    file: 'includes/abandon-body.lua',
    original: "peerWake('abandon')",
    replacement: "rcall('TIME')",
    class: 'legacy and bridge wake-up',
  },
  {
    id: 'lapsed-writer-counts-as-queued',
    file: 'includes/state.lua',
    original: "return rcall('ZSCORE', queueKey, owner) ~= false and numberField('q:' .. owner) > now",
    replacement: "return rcall('ZSCORE', queueKey, owner) ~= false",
    class: 'queue heartbeat',
  },
  {
    id: 'queue-head-live-at-its-deadline',
    file: 'includes/state.lua',
    original: 'if beat > now then return head, beat end',
    replacement: 'if beat >= now then return head, beat end',
    class: 'queue heartbeat',
  },
  {
    id: 'enqueue-moves-the-place',
    file: 'includes/state.lua',
    original: "rcall('ZADD', queueKey, 'NX', int(nowUs), owner)",
    replacement: "rcall('ZADD', queueKey, int(nowUs), owner)",
    class: 'dropped condition',
  },
  {
    id: 'fence-not-bumped',
    file: 'includes/state.lua',
    original: "fence = numberField('f') + 1",
    replacement: "fence = numberField('f')",
    class: 'fence',
  },
  {
    id: 'fenced-get-no-fence-on-a-new-key',
    file: 'fenced-get.lua',
    original: 'if not last or tonumber(last) < fence then',
    replacement: 'if last and tonumber(last) < fence then',
    class: 'fenced read',
  },
  {
    id: 'fenced-set-refuses-an-equal-fence',
    file: 'fenced-set.lua',
    original: 'if last and tonumber(last) > fence then',
    replacement: 'if last and tonumber(last) >= fence then',
    class: 'boundary',
  },
  {
    id: 'across-slots-queue-is-the-leases-key',
    file: 'extend-across-slots.lua',
    original: 'stateKey, leasesKey, queueKey = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]',
    replacement: 'stateKey, leasesKey, queueKey = ARGV[at + 1], ARGV[at + 2], ARGV[at + 2]',
    class: 'keys bound',
  },
  {
    id: 'extend-queue-is-the-leases-key',
    file: 'extend.lua',
    original: 'stateKey, leasesKey, queueKey = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k]',
    replacement: 'stateKey, leasesKey, queueKey = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k - 1]',
    class: 'keys bound',
  },
  {
    id: 'layout-1-without-fence-unseen',
    file: 'includes/state.lua',
    original: "if f or qx then return '1' end",
    replacement: "if f then return '1' end",
    class: 'layout detection',
    outsideModel: OLD_LAYOUTS,
  },
  {
    id: 'inspect-checks-no-layout',
    file: 'inspect.lua',
    original: 'checkLayout()',
    replacement: "rcall('TIME')",
    class: 'layout detection',
    outsideModel: INSPECT,
  },
  {
    id: 'extend-stops-after-one-lock',
    file: 'extend.lua',
    original: 'if k < locks and elapsedUs() >= budgetUs then break end',
    replacement: 'if k < locks then break end',
    class: 'renewal budget',
    outsideModel: ONE_LOCK,
  },
  {
    id: 'legacy-extend-ignores-its-budget',
    file: 'legacy-extend.lua',
    original: 'if k < locks and elapsedUs() >= budgetUs then break end',
    replacement: 'if k < 0 then break end',
    class: 'renewal budget',
    outsideModel: ONE_LOCK,
  },
  {
    id: 'abandon-drops-a-newer-place',
    file: 'includes/abandon-body.lua',
    original: "local ownPlace = not registered or drop == '' or drop == '*' or string.sub(registered, 1, #drop + 1) == drop .. ' '",
    replacement: 'local ownPlace = true',
    class: 'abandon',
    outsideModel: TWO_ACQUIRES,
  },
  {
    id: 'abandon-star-is-withdraw',
    file: 'includes/abandon-body.lua',
    original: "if drop == '*' then",
    replacement: "if drop == '' then",
    class: 'abandon',
    outsideModel: "the model abandons one acquire, by its hold id, never every hold ('*')",
  },
  {
    id: 'abandon-drops-nothing',
    file: 'abandon.lua',
    original: 'local drop = ARGV[2]',
    replacement: "local drop = ''",
    class: 'abandon',
  },
  {
    id: 'reader-refused-by-writer-at-its-deadline',
    file: 'includes/acquire-read-body.lua',
    original: 'if until_ and until_ > now then',
    replacement: 'if until_ and until_ >= now then',
    class: 'boundary',
  },
  {
    id: 'live-deadline-at-its-end',
    file: 'includes/state.lua',
    original: 'if d and d <= now then',
    replacement: 'if d and d < now then',
    class: 'boundary',
  },
  {
    id: 'live-count-at-its-end',
    file: 'includes/state.lua',
    original: "return rcall('ZCOUNT', leasesKey, '(' .. int(now), '+inf')",
    replacement: "return rcall('ZCOUNT', leasesKey, int(now), '+inf')",
    class: 'boundary',
  },
  {
    id: 'writer-beside-one-reader',
    file: 'includes/acquire-write-body.lua',
    original: 'if others > 0 then',
    replacement: 'if others > 1 then',
    class: 'boundary',
  },
  {
    id: 'release-returns-early-on-two-holds',
    file: 'includes/release-body.lua',
    original: 'if left > 0 then return left end',
    replacement: 'if left > 1 then return left end',
    class: 'boundary',
  },
  {
    id: 'holder-read-queues-behind-writers',
    file: 'includes/acquire-read-body.lua',
    original: 'if honourIntent and not mine then',
    replacement: 'if honourIntent then',
    class: 'dropped condition',
  },
  {
    id: 'upgrader-counts-itself',
    file: 'includes/acquire-write-body.lua',
    original: 'if mine then others = others - 1 end',
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
  {
    id: 'unfair-in-a-fair-queue',
    file: 'includes/acquire-write-body.lua',
    original: 'local mayPass = not fair and arrival and isQueued(owner, now)',
    replacement: 'local mayPass = arrival and isQueued(owner, now)',
    class: 'dropped condition',
  },
  {
    id: 'pass-without-waiting-before-the-free',
    file: 'includes/acquire-write-body.lua',
    original: "and tonumber(arrival) < numberField('fa') and numberField('sk') < MAX_SKIPS",
    replacement: "and numberField('sk') < MAX_SKIPS",
    class: 'dropped condition',
  },
  {
    id: 'upgrader-without-a-read-blocks',
    file: 'includes/state.lua',
    original: "if u and u ~= owner and numberField('ud') > now and rcall('HEXISTS', stateKey, 'r:' .. u) == 1 then",
    replacement: "if u and u ~= owner and numberField('ud') > now then",
    class: 'dropped condition',
  },
  {
    id: 'fast-release-with-writers-queued',
    file: 'includes/release-body.lua',
    original: "if mine and mine > now and rcall('ZCARD', leasesKey) == 1 and rcall('EXISTS', queueKey) == 0 then",
    replacement: "if mine and mine > now and rcall('ZCARD', leasesKey) == 1 then",
    class: 'dropped condition',
  },
  {
    id: 'repeated-release-drops-again',
    file: 'includes/release-body.lua',
    original: 'if not hasHold(list, holdId) then return holdCount(list) end',
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
  {
    id: 'handed-writer-stays-queued',
    file: 'includes/release-body.lua',
    original: 'dequeue(head)',
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
  {
    id: 'legacy-writer-blocks-itself',
    file: 'includes/legacy.lua',
    original: 'if value == false or value == owner then return nil end',
    replacement: 'if value == false then return nil end',
    class: 'dropped condition',
  },
  {
    id: 'legacy-mirror-overwrites-a-writer',
    file: 'includes/legacy.lua',
    original: 'if current == false or current == owner then',
    replacement: 'if true then',
    class: 'dropped condition',
  },
  {
    id: 'legacy-readers-keep-the-expired',
    file: 'includes/legacy.lua',
    original: "rcall('ZREMRANGEBYSCORE', readersKey, '-inf', int(now))",
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
  {
    id: 'legacy-extend-renews-the-expired',
    file: 'legacy-extend.lua',
    original: 'if mine and mine > now and peerIntact(owner) then',
    replacement: 'if mine and peerIntact(owner) then',
    class: 'dropped condition',
  },
  {
    id: 'legacy-reads-ignore-writers',
    file: 'legacy-acquire-read.lua',
    original: "local honourIntent = ARGV[3] == '1'",
    replacement: 'local honourIntent = false',
    class: 'dropped condition',
  },
  {
    id: 'hash-reads-ignore-writers',
    file: 'acquire-read.lua',
    original: "local honourIntent = ARGV[3] == '1'",
    replacement: 'local honourIntent = false',
    class: 'dropped condition',
  },
  {
    id: 'legacy-writers-never-queue',
    file: 'legacy-acquire-write.lua',
    original: 'local waitBeatMs = tonumber(ARGV[3])',
    replacement: 'local waitBeatMs = 0',
    class: 'dropped condition',
  },
  {
    id: 'renewal-from-the-old-deadline',
    file: 'includes/extend-one.lua',
    original: 'local deadline = int(now + leaseMs)',
    replacement: 'local deadline = int(mine + leaseMs)',
    class: 'wrong field',
  },
  {
    id: 'write-retry-after-own-lease',
    file: 'includes/acquire-write-body.lua',
    original: 'if first[1] == owner and first[4] then retry = tonumber(first[4]) - now end',
    replacement: "rcall('TIME')",
    class: 'wrong field',
  },
  {
    id: 'fresh-grant-lease-doubled',
    file: 'includes/fresh-grant.lua',
    original: "rcall('PEXPIRE', stateKey, ARGV[1])",
    replacement: "rcall('PEXPIRE', stateKey, ARGV[1] * 2)",
    class: 'wrong field',
  },
  {
    id: 'release-mode-always-write',
    file: 'release.lua',
    original: "local mode = m == 'w' and 'write' or 'read'",
    replacement: "local mode = 'write'",
    class: 'wrong field',
  },
  {
    id: 'legacy-inspect-write-ttl-of-the-read-key',
    file: 'legacy-inspect.lua',
    original: "rcall('PTTL', writeKey),",
    replacement: "rcall('PTTL', readKey),",
    class: 'wrong field',
    outsideModel: INSPECT,
  },
  {
    id: 'grant-shortens-a-longer-lease',
    file: 'includes/state.lua',
    original: 'if current and current > deadline then deadline = current end',
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
  {
    id: 'new-head-skip-count-reset-to-one',
    file: 'includes/acquire-write-body.lua',
    original: "rcall('HDEL', stateKey, 'sk')",
    replacement: "rcall('HSET', stateKey, 'sk', 1)",
    class: 'wrong value',
  },
  {
    id: 'hand-over-skip-count-kept',
    file: 'includes/acquire-write-body.lua',
    original: "rcall('HDEL', stateKey, 'sk')",
    replacement: "rcall('TIME')",
    class: 'dropped condition',
  },
];
