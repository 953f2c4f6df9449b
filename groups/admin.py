from django import forms
from django.conf import settings
from django.contrib import admin, messages

from groups.cluster_forms import ClusterForm
from groups.models import (
    FindingUrgency,
    PersonSettings,
    ApiToken,
    DirectoryIdentity,
    ExpansionJob,
    RoleMapping,
    AuditEvent,
    Cluster,
    ConsumerGroup,
    Finding,
    GroupTopic,
    JobFinding,
    LagSample,
    Notification,
    PartitionGeneration,
    Protection,
    RemediationJob,
    RepairRule,
    RuleRepair,
    Topic,
)
from groups.services.clusters import (
    EDITABLE_FIELDS,
    cluster_create,
    cluster_set_enabled,
    cluster_update,
    group_declare_policy,
)
from groups.selectors.access import scope_of
from groups.services.identity import role_mapping_delete, role_mapping_save
from groups.services.standing_rules import rule_delete, rule_problems, rule_save
from groups.services.tokens import api_token_create, api_token_revoke


class ScopedAdmin:
    """Lists and pages limited to what the person's team scope lets them read
    (``groups.selectors.access``), as on the console's pages. ``scope_fields``:
    the row's paths to its cluster's name, group id and topic name."""

    scope_fields: dict[str, str] = {}

    def get_queryset(self, request):
        return scope_of(request.user).rows(super().get_queryset(request), **self.scope_fields)


class ClusterAdminForm(ClusterForm):
    """The cluster pages' form: the same validation in the admin."""

    class Meta(ClusterForm.Meta):
        fields = [*EDITABLE_FIELDS, "enabled"]


@admin.register(Cluster)
class ClusterAdmin(ScopedAdmin, admin.ModelAdmin):
    """Saved through the same audited services as the cluster pages."""

    scope_fields = {"cluster": "name"}

    form = ClusterAdminForm
    list_display = ["name", "bootstrap_servers", "security_protocol", "enabled", "status", "last_poll_at"]
    list_filter = ["enabled", "status"]
    search_fields = ["name", "bootstrap_servers"]
    readonly_fields = ["status", "last_poll_at", "last_error", "password_set", "secrets_set"]

    @admin.display(boolean=True, description="SASL password set")
    def password_set(self, obj: Cluster) -> bool:
        return obj.has_sasl_password

    @admin.display(description="Other secrets set")
    def secrets_set(self, obj: Cluster) -> str:
        return ", ".join(name for name in Cluster.SECRETS if name != "sasl_password" and obj.has_secret(name)) \
            or "none"

    def save_model(self, request, obj: Cluster, form: ClusterAdminForm, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            created = cluster_create(user=request.user, data=data, secrets=form.secrets)
            obj.pk, obj.id = created.pk, created.id
        else:
            cluster_update(user=request.user, cluster_id=obj.pk, data=data, secrets=form.secrets, clear=form.cleared)
        if "enabled" in form.changed_data:
            cluster_set_enabled(user=request.user, cluster_id=obj.pk, enabled=data["enabled"])


class ServiceWrittenAdmin(admin.ModelAdmin):
    """Rows a person writes in the admin, saved and deleted (one by one, in
    bulk too) only through their audited service: ``service_save`` and
    ``service_delete``."""

    def service_save(self, obj, by) -> None:
        raise NotImplementedError

    def service_delete(self, obj, by) -> None:
        raise NotImplementedError

    def save_model(self, request, obj, form, change):
        self.service_save(obj, request.user)

    def delete_model(self, request, obj):
        self.service_delete(obj, request.user)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.service_delete(obj, request.user)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Observed state is written by the poller only."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Topic)
class TopicAdmin(ScopedAdmin, ReadOnlyAdmin):
    scope_fields = {"cluster": "cluster__name", "topic": "name"}
    list_display = ["name", "cluster", "partition_count", "kafka_topic_id", "deleted", "is_internal", "updated_at"]
    list_filter = ["cluster", "deleted", "is_internal"]
    search_fields = ["name"]


@admin.register(PartitionGeneration)
class PartitionGenerationAdmin(ScopedAdmin, ReadOnlyAdmin):
    scope_fields = {"cluster": "topic__cluster__name", "topic": "topic__name"}
    list_display = ["topic", "number", "partition_count", "added_partitions", "is_new_lineage", "observed_at"]
    list_filter = ["topic__cluster", "is_new_lineage"]
    search_fields = ["topic__name"]
    list_select_related = ["topic"]

    @admin.display(description="partitions")
    def partition_count(self, obj: PartitionGeneration) -> int:
        return len(obj.partitions)


@admin.register(ConsumerGroup)
class ConsumerGroupAdmin(ScopedAdmin, admin.ModelAdmin):
    """Only the declared offset-reset policy and isolation level are a person's to change."""

    scope_fields = {"cluster": "cluster__name", "group": "group_id"}

    list_display = ["group_id", "cluster", "state", "type", "member_count", "declared_policy", "declared_isolation",
                    "present"]
    list_filter = ["cluster", "state", "declared_policy", "declared_isolation", "present"]
    search_fields = ["group_id"]
    fields = ["cluster", "group_id", "state", "type", "assignor", "member_count", "present", "declared_policy",
              "declared_isolation", "first_seen_at", "last_seen_at"]
    readonly_fields = [f for f in fields if f not in ("declared_policy", "declared_isolation")]

    def has_add_permission(self, request) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        changed = form.changed_data
        group_declare_policy(user=request.user, group_id=obj.pk,
                             policy=obj.declared_policy if "declared_policy" in changed else None,
                             isolation=obj.declared_isolation if "declared_isolation" in changed else None)


@admin.register(Finding)
class FindingAdmin(ScopedAdmin, ReadOnlyAdmin):
    scope_fields = {"cluster": "cluster__name", "group": "group__group_id", "topic": "topic__name"}
    list_display = ["group", "topic", "partition", "generation_number", "status", "lag", "missed_definite",
                    "missed_possible", "policy_source", "created_at", "closed_at"]
    list_filter = ["cluster", "resolution", "state", "policy_source"]
    search_fields = ["group__group_id", "topic__name"]
    list_select_related = ["group", "topic", "generation"]

    @admin.display(description="generation")
    def generation_number(self, obj: Finding) -> int:
        return obj.generation.number

    @admin.display(description="status", ordering="state")
    def status(self, obj: Finding) -> str:
        """Open with its state, or closed with its way out: a closed finding
        keeps the state it was closed in, which is not what it is now."""
        if obj.closed_at is None:
            return f"open: {'partly expired' if obj.state == Finding.State.EXPIRED else obj.state}"
        way_out = obj.get_resolution_display() if obj.resolution else "closed"
        return f"{way_out} (was {obj.state})"


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["event", "cluster", "status", "attempts", "created_at", "sent_at"]
    list_filter = ["status", "event"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "action", "actor", "system", "cluster"]
    list_filter = ["action", "system"]


class JobFindingInline(admin.TabularInline):
    model = JobFinding
    extra = 0
    can_delete = False
    readonly_fields = ["finding", "kind", "active"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RemediationJob)
class RemediationJobAdmin(ScopedAdmin, ReadOnlyAdmin):
    """Jobs move only through the services (compare-and-set, audited)."""

    scope_fields = {"cluster": "cluster__name", "group": "group__group_id"}

    list_display = ["id", "kind", "status", "cluster", "group", "requested_by", "approved_by", "created_at",
                    "finished_at"]
    list_filter = ["kind", "status", "cluster"]
    search_fields = ["group__group_id"]
    list_select_related = ["cluster", "group", "requested_by", "approved_by"]
    inlines = [JobFindingInline]


class ApiTokenAdminForm(forms.ModelForm):
    days = forms.IntegerField(min_value=1, help_text="valid for this many days (at most API_TOKEN_MAX_DAYS)")

    class Meta:
        model = ApiToken
        fields = ["user", "name", "read_only"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["days"].initial = settings.API_TOKEN_DEFAULT_DAYS

    def clean_days(self) -> int:
        days = self.cleaned_data["days"]
        if days > settings.API_TOKEN_MAX_DAYS:
            raise forms.ValidationError(f"at most {settings.API_TOKEN_MAX_DAYS} days")
        return days


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here (shown once, then only their prefix) or by each
    user on their own page, and revoked with the list's action (the row stays,
    for the audit log)."""

    form = ApiTokenAdminForm
    list_display = ["name", "user", "prefix", "read_only", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["read_only"]
    readonly_fields = ["prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        token, key = api_token_create(user=form.cleaned_data["user"], name=form.cleaned_data["name"],
                                      days=form.cleaned_data["days"], read_only=form.cleaned_data["read_only"],
                                      created_by=request.user)
        obj.pk, obj.key_hash, obj.prefix = token.pk, token.key_hash, token.prefix
        messages.warning(request, f"API token for {token.user}: {key} (copy it now; it is not shown again)")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token_id in queryset.values_list("id", flat=True):
            api_token_revoke(token_id=token_id, by=request.user)
        messages.success(request, f"{queryset.count()} token(s) revoked")


@admin.register(GroupTopic)
class GroupTopicAdmin(ScopedAdmin, ReadOnlyAdmin):
    scope_fields = {"cluster": "topic__cluster__name", "group": "group__group_id", "topic": "topic__name"}
    list_display = ["group", "topic", "lag", "updated_at"]
    list_filter = ["topic__cluster"]
    search_fields = ["group__group_id", "topic__name"]
    list_select_related = ["group", "topic"]


@admin.register(LagSample)
class LagSampleAdmin(ScopedAdmin, ReadOnlyAdmin):
    scope_fields = {"cluster": "group__cluster__name", "group": "group__group_id", "topic": "topic__name"}
    list_display = ["group", "topic", "at", "lag"]
    search_fields = ["group__group_id", "topic__name"]
    list_select_related = ["group", "topic"]
    date_hierarchy = "at"


@admin.register(RoleMapping)
class RoleMappingAdmin(ServiceWrittenAdmin):
    """Directory group -> role, re-applied at each person's next login; every
    change is in the audit log."""

    list_display = ["directory_group", "role", "clusters", "group_pattern", "topic_pattern"]
    list_filter = ["role"]
    search_fields = ["directory_group"]

    def service_save(self, obj, by) -> None:
        role_mapping_save(mapping=obj, by=by)

    def service_delete(self, obj, by) -> None:
        role_mapping_delete(mapping=obj, by=by)


@admin.register(DirectoryIdentity)
class DirectoryIdentityAdmin(ReadOnlyAdmin):
    """Who each person is at the provider that last logged them in (written at login)."""

    list_display = ["user", "source", "subject", "issuer", "last_login_at"]
    list_filter = ["source"]
    search_fields = ["user__username", "subject"]
    list_select_related = ["user"]


class RepairRuleForm(forms.ModelForm):
    class Meta:
        model = RepairRule
        fields = ["cluster", "name", "topic_pattern", "group_pattern", "action", "sink", "replay_topic", "handler",
                  "max_records", "enabled"]

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            candidate = RepairRule(**{name: cleaned.get(name) for name in self.Meta.fields})
            for field, problem in rule_problems(candidate).items():
                self.add_error(field, problem)
        return cleaned


@admin.register(RepairRule)
class RepairRuleAdmin(ScopedAdmin, ServiceWrittenAdmin):
    """Standing repair rules (issue 33, item 5): repairs approved in advance
    for expansions nobody announced; every change is audited."""

    scope_fields = {"cluster": "cluster__name"}
    form = RepairRuleForm
    list_display = ["name", "cluster", "topic_pattern", "group_pattern", "action", "sink", "max_records", "enabled"]
    list_filter = ["cluster", "action", "sink", "enabled"]
    search_fields = ["name", "topic_pattern", "group_pattern"]

    def service_save(self, obj, by) -> None:
        rule_save(rule=obj, by=by)

    def service_delete(self, obj, by) -> None:
        rule_delete(rule=obj, by=by)


@admin.register(RuleRepair)
class RuleRepairAdmin(ScopedAdmin, ReadOnlyAdmin):
    """What each rule did: the job it queued, or why it left a finding to a person."""

    scope_fields = {"cluster": "rule__cluster__name", "group": "finding__group__group_id",
                    "topic": "finding__topic__name"}
    list_display = ["rule", "finding", "job", "refused", "created_at"]
    list_select_related = ["rule", "finding", "job"]


@admin.register(Protection)
class ProtectionAdmin(ScopedAdmin, ReadOnlyAdmin):
    """Gapwatch's commits as a member of a group (issue 43): by an expansion or a protect rule, won
    (no member held the partition) or lost."""

    scope_fields = {"cluster": "cluster__name", "group": "group_id", "topic": "topic"}
    list_display = ["group_id", "topic", "partition", "offset", "won", "expansion", "rule", "made_at"]
    list_filter = ["won", "cluster"]
    list_select_related = ["cluster", "expansion", "rule"]
    search_fields = ["group_id", "topic"]


@admin.register(FindingUrgency)
class FindingUrgencyAdmin(ScopedAdmin, ReadOnlyAdmin):
    """What retention leaves of an open finding's missed range, as a worker last read it (issue 44)."""

    scope_fields = {"cluster": "finding__cluster__name", "group": "finding__group__group_id",
                    "topic": "finding__topic__name"}
    list_display = ["finding", "retention_ms", "retention_bytes", "first_offset", "first_timestamp", "expires_at",
                    "read_at", "error"]
    list_select_related = ["finding"]


@admin.register(PersonSettings)
class PersonSettingsAdmin(ReadOnlyAdmin):
    """Each person's own settings (their time zone and color scheme), changed on their account page."""

    list_display = ["user", "time_zone", "color_scheme"]
    list_select_related = ["user"]


@admin.register(ExpansionJob)
class ExpansionJobAdmin(ScopedAdmin, ReadOnlyAdmin):
    """Guarded expansions, read-only: requested, approved and carried out
    through their pages, the API and the job (groups.services.expansion.job)."""

    scope_fields = {"cluster": "cluster__name", "topic": "topic__name"}
    list_display = ["id", "cluster", "topic", "from_partitions", "to_partitions", "status", "requested_by",
                    "approved_by", "created_at", "finished_at"]
    list_filter = ["cluster", "status"]
    list_select_related = ["cluster", "topic", "requested_by", "approved_by"]
