-- sluice-wait.lua: hold a request while its backend has no server that is
-- up, for at most about 1 s, instead of answering 503 at once.
--
-- A reload or restart of HAProxy forgets the dynamic servers sluice adds;
-- the controller notices the new process within --haproxy-watch-interval
-- and adds them back. Requests that arrive in that gap wait here instead of
-- failing. Use it in the backend sluice drives:
--
--   global
--       lua-load /etc/haproxy/sluice-wait.lua
--   backend sluice
--       http-request lua.sluice_wait_servers sluice
--
-- A backend that is really empty still answers 503, about 1 s later.
core.register_action("sluice_wait_servers", {"http-req"}, function(txn, backend)
  -- nbsrv counts the usable servers, dynamic ones included (Lua's
  -- core.backends[...].servers lists only those of the configuration).
  for _ = 1, 40 do
    if (tonumber(txn.f:nbsrv(backend)) or 0) > 0 then return end
    core.msleep(25)
  end
end, 1)
