-- Argo CD health of a provider-kilomesh NodeInventory (kube.kilomesh.io/v1alpha1).
-- Argo CD's built-in check for Crossplane's managed resources covers only
-- *.crossplane.io kinds; this one reads the same conditions.
--
--   Suspended    reconciliation is paused (crossplane.io/paused).
--   Degraded     Synced=False: the member cannot be observed right now (a
--                missing ProviderConfig or Secret, refused credentials, an API
--                server that does not answer). The nodes last observed are
--                kept, and so are the mesh's Peers built from them.
--   Healthy      Ready=True and Synced=True: the member's nodes are observed.
--   Progressing  anything else: the first observation is on its way.
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
  hs.message = synced.message or "The member cluster cannot be observed"
  return hs
end

if ready ~= nil and ready.status == "True" and synced ~= nil and synced.status == "True" then
  local count = 0
  if obj.status.atProvider ~= nil then
    count = obj.status.atProvider.nodeCount or 0
  end
  hs.status = "Healthy"
  hs.message = count .. " nodes observed"
  return hs
end

hs.status = "Progressing"
hs.message = "Waiting for the first observation of the member cluster"
return hs
