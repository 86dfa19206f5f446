-- Argo CD health of a provider-kilomesh PeerSet (kube.kilomesh.io/v1alpha1).
-- Argo CD's built-in check for Crossplane's managed resources covers only
-- *.crossplane.io kinds; this one reads the same conditions.
--
--   Suspended    reconciliation is paused (crossplane.io/paused).
--   Degraded     Synced=False: the member cannot be reached or refuses the
--                Peers (no Peer CRD, no permission); or Ready=False with
--                reason PeerProblems: some Peers cannot be applied (a Peer of
--                the same name or key that the set does not own, a Peer Kilo
--                would reject), which needs a person.
--   Healthy      Ready=True and Synced=True: every Peer is applied.
--   Progressing  anything else: Peers on their way.
--
-- Only the base and table libraries are used (Argo CD's sandbox).

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

local c = conditionsByType()
local ready, synced = c["Ready"], c["Synced"]

if synced ~= nil and synced.status == "False" and synced.reason == "ReconcilePaused" then
  hs.status = "Suspended"
  hs.message = "Reconciliation is paused"
  return hs
end

if synced ~= nil and synced.status == "False" then
  hs.status = "Degraded"
  hs.message = synced.message or "The Peers cannot be written into the member cluster"
  return hs
end

if ready ~= nil and ready.status == "False" and ready.reason == "PeerProblems" then
  hs.status = "Degraded"
  hs.message = ready.message or "Some Peers cannot be applied"
  return hs
end

if ready ~= nil and ready.status == "True" and synced ~= nil and synced.status == "True" then
  local applied = 0
  if obj.status.atProvider ~= nil then
    applied = obj.status.atProvider.applied or 0
  end
  hs.status = "Healthy"
  hs.message = applied .. " Peers applied"
  return hs
end

hs.status = "Progressing"
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = ready.message
else
  hs.message = "Waiting for the Peers to be applied"
end
return hs
