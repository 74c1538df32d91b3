"""Every mark nsscaler reads or leaves on an object: annotation and label keys, selectors, its field manager.

Defined once here and imported everywhere else, so a key can never drift between the code that writes a
record and the code that reads it back (docs/reference/marks.md)."""

from __future__ import annotations

DOMAIN = "nsscaler.wubw.fun"

#: the count a scalable workload had before its freeze ("3"), restored exactly
ANNOTATION_ORIGINAL_REPLICAS = f"{DOMAIN}/original-replicas"
#: a CronJob's or Job's previous `spec.suspend` ("false")
ANNOTATION_ORIGINAL_SUSPEND = f"{DOMAIN}/original-suspend"
#: a KEDA ScaledObject's previous paused-replicas annotation, as JSON (`"3"` or `null`)
ANNOTATION_ORIGINAL_PAUSED = f"{DOMAIN}/original-paused-replicas"
#: KEDA's own key, which nsscaler sets to "0" on the ScaledObject of a frozen workload
ANNOTATION_KEDA_PAUSED = "autoscaling.keda.sh/paused-replicas"
#: the value a kind frozen by one field or annotation (a row: `job.model.kinds.rows`) had before its freeze, as
#: JSON (`"off"`, `2`, `false`, or `null` when it was absent, so the restore removes it)
ANNOTATION_ORIGINAL_VALUE = f"{DOMAIN}/original-value"
#: a StatefulSet's `persistentVolumeClaimRetentionPolicy.whenScaled` before the freeze set it to Retain ("Delete")
ANNOTATION_ORIGINAL_WHEN_SCALED = f"{DOMAIN}/original-when-scaled"
#: a DaemonSet's Pod template `nodeSelector` before the freeze, as JSON (`{"disk": "ssd"}`, or `null` for none)
ANNOTATION_ORIGINAL_NODE_SELECTOR = f"{DOMAIN}/original-node-selector"
#: the node label a frozen DaemonSet's Pods require: no node carries it, so the DaemonSet controller removes them
FROZEN_NODE_LABEL = f"{DOMAIN}/frozen"
#: what one unit (replica, running Job) of a frozen workload asked the scheduler for, as compact JSON
#: (`job.model.resources.Footprint.record`): written with the record, removed with it, so the capacity a
#: freeze gave back is known from metadata alone
ANNOTATION_FREED = f"{DOMAIN}/freed"
#: the NSScaler whose hold froze the workload
ANNOTATION_SCALED_BY = f"{DOMAIN}/scaled-by"
#: set by a user: nsscaler never touches the workload, nor what it controls
ANNOTATION_EXCLUDE = f"{DOMAIN}/exclude"
#: set by a user on a workload: its restore tier ("0" comes back first; the next tier only once every workload of
#: the earlier ones in its namespace is available, or the policy's `restore_wait` has passed)
ANNOTATION_RESTORE_TIER = f"{DOMAIN}/restore-tier"
#: on every object carrying a record, so a restore sweep selects them server-side
LABEL_SCALED = f"{DOMAIN}/scaled"
SCALED_SELECTOR = f"{LABEL_SCALED}=true"
#: everything else: objects without our label match too (the API server's `!=`)
UNSCALED_SELECTOR = f"{LABEL_SCALED}!=true"
#: on a ClusterRole that grants access to a custom kind: aggregated into nsscaler's own
AGGREGATE_LABEL = f"{DOMAIN}/aggregate-to-nsscaler"

#: the field manager of every write, so `managedFields` tells nsscaler's changes from everyone else's
FIELD_MANAGER = "nsscaler"

#: the advice given wherever something runs that a user may mean to keep running
EXCLUDE_FIX = f'annotate it {ANNOTATION_EXCLUDE}="true" if it is meant to run'

#: an HTTPRoute pointed at the waker while its namespace is held: its `spec.rules` before, as JSON, restored exactly
ANNOTATION_ORIGINAL_RULES = f"{DOMAIN}/original-rules"
#: on such a route once its namespace is no longer held but not yet awake: when it began to wait (RFC 3339). On the
#: route itself, not on its policy, so the wait survives a policy being deleted and is bounded (`restore_wait`)
#: whatever the app does; removed when the route comes back, or when its namespace is held again
ANNOTATION_ROUTE_WAITING = f"{DOMAIN}/waiting-since"
#: the request header the gateway sets (`RequestHeaderModifier` `set`, which replaces any value a client sent) on
#: every request of a held namespace's route, naming that namespace for the waker
HEADER_NAMESPACE = "X-Nsscaler-Namespace"
#: the waker's Service, in nsscaler's own namespace, and its port
WAKER_SERVICE = "nsscaler-waker"
WAKER_PORT = 8080
#: on a Wake the waker created: the request that woke the namespace (`GET host/path`); `requestedBy` is the waker's
#: own identity, which admission checks
ANNOTATION_WAKE_REQUEST = f"{DOMAIN}/request"
#: on an NSScaler whose policy points routes at the waker: it stays, if deleted, until every route it pointed has
#: come back. A run reads HTTPRoutes only while some policy wakes on request or carries it: otherwise none can
#: carry a record, and the run that finds nothing to do pays no request for routes
FINALIZER_ROUTES = f"{DOMAIN}/routes"

#: the CronJob that runs nsscaler, in nsscaler's own namespace (the install names it so: its RBAC, its admission
#: policy and the waker name it too)
OWN_CRONJOB = "nsscaler"
#: on that CronJob, set by `nsscaler release` in the write that suspends it: when the release gave everything back
#: (RFC 3339). A run started from a CronJob that carries it (by hand, by the waker) freezes nothing and exits 2: a
#: suspended CronJob alone may be a pause, after which a run by hand is still wanted; a released one never runs
ANNOTATION_RELEASED = f"{DOMAIN}/released"

#: on a held Namespace (the hold, docs/operating/hold.md): how the admission policy `nsscaler-hold` treats requests
#: that would start Pods there, "deny" or "warn" (its bindings select namespaces by this label's value). Written by
#: a run only when the namespace's hold changes; removed first when a Wake wakes it, and by `nsscaler release`
LABEL_HOLD = f"{DOMAIN}/hold"
#: the values of `LABEL_HOLD` (a policy's `spec.hold` but "off", which writes no mark)
HOLD_MODES = ("deny", "warn")
#: on a held Namespace: the words a refused request reads after what it tried (who holds it, until when, how to wake it)
ANNOTATION_HOLD = f"{DOMAIN}/held"
#: on a held Namespace: the resources its holders freeze, as " deployments.apps cronjobs.batch " (spaces around each,
#: so that the admission policy finds one with a plain `contains`); a kind outside it may grow where it runs already
ANNOTATION_HOLD_KINDS = f"{DOMAIN}/hold-kinds"
#: on a held Namespace: the user name of nsscaler's own ServiceAccount, the one account the hold lets by there (its
#: restores). Read from the mark, not matched by name: a ServiceAccount called nsscaler in another namespace is held
ANNOTATION_HOLD_ACCOUNT = f"{DOMAIN}/hold-account"
#: on a held Namespace: the workloads there annotated `ANNOTATION_EXCLUDE` when the run last wrote the mark, as
#: " deployments.apps/web statefulsets.apps/db " (absent: none). A `/scale` request carries no annotation: the
#: hold reads the opt-out here, where a person with `edit` cannot write
ANNOTATION_HOLD_EXCLUDED = f"{DOMAIN}/hold-excluded"
#: the hold mark's annotations, all written and lifted together
HOLD_ANNOTATIONS = (ANNOTATION_HOLD, ANNOTATION_HOLD_KINDS, ANNOTATION_HOLD_ACCOUNT, ANNOTATION_HOLD_EXCLUDED)
