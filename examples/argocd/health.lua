-- Argo CD health of a kilomesh ClusterMesh (kilomesh.io/v1alpha1).
--
--   Suspended    Crossplane's reconciliation is paused (crossplane.io/paused).
--   Degraded     NetworksOverlap=True: the mesh is frozen until the CIDRs are
--                fixed; or Synced=False: the function failed (a malformed spec,
--                a mesh too large for one response); or ClustersReachable=False
--                or PeersDelivered=False for more than unreachableMinutes.
--   Healthy      Ready=True and Synced=True, no node waiting for Kilo
--                (Converged is not False) and every member observed at least
--                once (ClustersReachable is not Unknown).
--   Progressing  anything else: composed resources on their way, nodes
--                converging, a member unreachable for a short while.
--
-- Argo CD runs health checks without Lua's standard libraries unless
-- useOpenLibs is set: only the base and table libraries and require("os")
-- (time and date) are used here. Timestamps are compared as strings, which
-- is exact for the RFC 3339 UTC form Kubernetes writes them in.

-- How long a member may stay unreachable before the mesh is Degraded. Argo
-- CD notices the change at the next refresh of the Application (every three
-- minutes by default) or at the next change of the ClusterMesh.
local unreachableMinutes = 10

local hs = {}

local function conditionsByType()
  local byType = {}
  if obj.status ~= nil and obj.status.conditions ~= nil then
    for _, c in ipairs(obj.status.conditions) do
      if c.type ~= nil then
        byType[c.type] = c
      end
    end
  end
  return byType
end

local function has(c, status)
  return c ~= nil and c.status == status
end

local function messageOf(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local function twoDigits(n)
  if n < 10 then
    return "0" .. n
  end
  return "" .. n
end

-- cutoff is the moment unreachableMinutes ago, written like a Kubernetes
-- timestamp (2006-01-02T15:04:05Z).
local function cutoff()
  local clock = require("os")
  local t = clock.date("!*t")
  t.min = t.min - unreachableMinutes
  -- os.time reads the fields as local time and os.date("*t", s) writes them
  -- back in local time: the round trip carries a negative minute into the
  -- hours, days and months before without changing the zone.
  t = clock.date("*t", clock.time(t))
  return t.year .. "-" .. twoDigits(t.month) .. "-" .. twoDigits(t.day) .. "T" ..
    twoDigits(t.hour) .. ":" .. twoDigits(t.min) .. ":" .. twoDigits(t.sec) .. "Z"
end

-- unreachableSince is when the longest outage among the unreachable members
-- began: the earliest status.clusters[].unreachableSince, else the moment
-- ClustersReachable turned False.
local function unreachableSince(reachable)
  local since = nil
  if obj.status.clusters ~= nil then
    for _, member in ipairs(obj.status.clusters) do
      local s = member.unreachableSince
      if member.reachable == false and s ~= nil and (since == nil or s < since) then
        since = s
      end
    end
  end
  if since == nil then
    since = reachable.lastTransitionTime
  end
  return since
end

-- lasting is Degraded for a problem that began before the cutoff, and
-- Progressing while it may still pass by itself.
local function lasting(since)
  if since ~= nil and since < cutoff() then
    return "Degraded"
  end
  return "Progressing"
end

local function summary()
  local s = obj.status
  local text = (s.clusterCount or 0) .. " clusters, " .. (s.peerCount or 0) .. " Peers"
  if s.skippedNodeCount == 1 then
    text = text .. ", 1 node skipped (see status.clusters[].skipped)"
  elseif s.skippedNodeCount ~= nil and s.skippedNodeCount > 1 then
    text = text .. ", " .. s.skippedNodeCount .. " nodes skipped (see status.clusters[].skipped)"
  end
  return text
end

local c = conditionsByType()
local ready, synced = c["Ready"], c["Synced"]
local overlap, reachable, converged = c["NetworksOverlap"], c["ClustersReachable"], c["Converged"]
local delivered = c["PeersDelivered"]

if has(synced, "False") and synced.reason == "ReconcilePaused" then
  hs.status = "Suspended"
  hs.message = messageOf(synced, "Reconciliation is paused")
  return hs
end

if has(overlap, "True") then
  hs.status = "Degraded"
  hs.message = "The mesh is frozen, its networks overlap: " .. messageOf(overlap, "see the NetworksOverlap condition")
  return hs
end

if has(synced, "False") then
  hs.status = "Degraded"
  hs.message = messageOf(synced, "Synced is False")
  return hs
end

if has(reachable, "False") then
  hs.status = lasting(unreachableSince(reachable))
  hs.message = messageOf(reachable, "A member cluster cannot be observed")
  return hs
end

-- Peers that cannot be written into a member (no Peer CRD, no permission, a
-- Peer in the way) degrade the mesh once the problem has lasted.
if has(delivered, "False") then
  hs.status = lasting(delivered.lastTransitionTime)
  hs.message = messageOf(delivered, "Peers cannot be written into a member cluster")
  return hs
end

if has(converged, "False") then
  hs.status = "Progressing"
  hs.message = messageOf(converged, "Nodes are waiting for Kilo")
  return hs
end

if has(reachable, "Unknown") then
  hs.status = "Progressing"
  hs.message = messageOf(reachable, "Waiting for the first observation of every member")
  return hs
end

if has(ready, "True") and has(synced, "True") then
  hs.status = "Healthy"
  hs.message = summary()
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = messageOf(ready, "Waiting for the composed resources to become ready")
else
  hs.message = "Waiting for Crossplane to reconcile the ClusterMesh"
end
return hs
