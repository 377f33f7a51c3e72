-- Take one call: KEYS[1] holds the token bucket's theoretical arrival time
-- (GCRA), KEYS[2] the burst detector's call times (a sorted set).
-- ARGV: now (µs), emission interval (µs, 0: no bucket), bucket size,
-- burst max calls (0: no detector), burst window (µs), a unique member.
-- Returns {rule, count, retry µs}: rule 0 admitted, 1 burst, 2 rate.
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local size = tonumber(ARGV[3])
local maxcalls = tonumber(ARGV[4])
local window = tonumber(ARGV[5])

if maxcalls > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - window))
  local n = redis.call('ZCARD', KEYS[2])
  if n >= maxcalls then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {1, n, tonumber(first[2]) + window - now}
  end
end

if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tat < now then tat = now end
  local newtat = tat + interval
  local allowed = newtat - interval * size
  if allowed > now then
    return {2, 0, allowed - now}
  end
  redis.call('SET', KEYS[1], string.format('%.0f', newtat), 'PX', math.ceil((newtat - now) / 1000) + 1)
end

if maxcalls > 0 then
  redis.call('ZADD', KEYS[2], string.format('%.0f', now), ARGV[6])
  redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000) + 1)
end
return {0, 0, 0}
