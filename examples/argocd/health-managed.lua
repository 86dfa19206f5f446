-- Argo CD health of provider-kilomesh's managed resources
-- (kube.kilomesh.io/v1alpha1): NodeInventory and PeerSet. Argo CD's
-- built-in check for Crossplane's managed resources covers only
-- *.crossplane.io kinds; this one reads the same conditions.
--
--   Suspended    reconciliation is paused (crossplane.io/paused).
--   Degraded     Synced=False: the member cannot be reached right now (a
--                missing ProviderConfig or Secret, refused credentials, an API
--                server that does not answer, no Peer CRD). A NodeInventory
--                keeps the nodes it last observed, and the mesh its Peers.
--                Or, for a PeerSet, Ready=False with reason PeerProblems: some
--                Peers cannot be applied (a Peer of the same name or key that
--                the set does not own, a Peer Kilo would reject), which needs
--                a person.
--   Healthy      Ready=True and Synced=True: the member's nodes are observed,
--                or every Peer is applied.
--   Progressing  anything else: the first observation or Peers on their way.
--
-- Only the base and table libraries are used (Argo CD's sandbox).

local hs = {}

local ready, synced = nil, nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then
      ready = c
    elseif c.type == "Synced" then
      synced = c
    end
  end
end
local observed = {}
if obj.status ~= nil and obj.status.atProvider ~= nil then
  observed = obj.status.atProvider
end

if synced ~= nil and synced.status == "False" and synced.reason == "ReconcilePaused" then
  hs.status = "Suspended"
  hs.message = "Reconciliation is paused"
  return hs
end

if synced ~= nil and synced.status == "False" then
  hs.status = "Degraded"
  hs.message = synced.message or "The member cluster cannot be reached"
  return hs
end

if ready ~= nil and ready.status == "False" and ready.reason == "PeerProblems" then
  hs.status = "Degraded"
  hs.message = ready.message or "Some Peers cannot be applied"
  return hs
end

if ready ~= nil and ready.status == "True" and synced ~= nil and synced.status == "True" then
  hs.status = "Healthy"
  if obj.kind == "PeerSet" then
    hs.message = (observed.applied or 0) .. " Peers applied"
  else
    hs.message = (observed.nodeCount or 0) .. " nodes observed"
  end
  return hs
end

hs.status = "Progressing"
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = ready.message
elseif obj.kind == "PeerSet" then
  hs.message = "Waiting for the Peers to be applied"
else
  hs.message = "Waiting for the first observation of the member cluster"
end
return hs
