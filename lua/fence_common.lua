-- Shared by the fencing scripts (prepended at build time).
--
-- Tokens are compared as decimal strings, never as Lua numbers: a Lua number is a double,
-- exact only up to 2^53, and two tokens above that could compare equal (or a lower one
-- pass for the higher). INCR itself is exact up to 2^63 - 1.

-- Whether `text` is a token as this crate writes it: decimal digits, no leading zero.
local function is_token(text)
    return string.find(text, '^[1-9]%d*$') ~= nil or text == '0'
end

-- Whether token `a` is below token `b`; both checked with `is_token`.
local function token_below(a, b)
    if #a ~= #b then
        return #a < #b
    end
    return a < b
end

-- The token stored at `key` ('0' when absent), or nil when the key holds anything else.
local function stored_token(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then
        return '0'
    end
    if kind ~= 'string' then
        return nil
    end
    local value = redis.call('get', key)
    if is_token(value) then
        return value
    end
    return nil
end
