-- a strategy that makes much more garbage than its memory limit, but never holds much: the
-- collector makes room, and the limit is not hit (test_sandbox.sh)
local wp = require("wp")
return {
  build = function(plan, ctx)
    local last
    for i = 1, 300 do last = string.rep("x", 1 << 20) .. i end
    wp.bad_option(nil, "garbage: made 300 MiB, last " .. #last .. " bytes")
  end,
}
