-- Which of a list of commands the connected user may run, for errors that name the
-- missing permission. Redis' own refusals do not say which key or channel was refused
-- ("one of the keys used as arguments"); redis.acl_check_cmd (Redis 7.0) does, one by one.
-- Declares no keys: it reads nothing, and the names it is given are only checked.
-- ARGV: the checks, each a count n followed by a command name and its n - 1 arguments.
-- Returns the 1-based numbers of the checks the user fails, in order.
local refused = {}
local at, check = 1, 1
while at <= #ARGV do
    local count = tonumber(ARGV[at])
    if not redis.acl_check_cmd(unpack(ARGV, at + 1, at + count)) then
        refused[#refused + 1] = check
    end
    at, check = at + count + 1, check + 1
end
return refused
