from django import forms
from django.contrib import admin

from groups.models import Cluster


class ClusterAdminForm(forms.ModelForm):
    # Write-only: the stored password is never sent back to the browser.
    sasl_password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the stored password.",
    )
    clear_sasl_password = forms.BooleanField(required=False)
    webhook_url = forms.URLField(required=False, assume_scheme="https")

    class Meta:
        model = Cluster
        fields = [
            "name",
            "bootstrap_servers",
            "security_protocol",
            "sasl_mechanism",
            "sasl_username",
            "enabled",
            "webhook_url",
        ]

    def save(self, commit: bool = True) -> Cluster:
        cluster = super().save(commit=False)
        if self.cleaned_data.get("clear_sasl_password"):
            cluster.set_sasl_password("")
        elif self.cleaned_data.get("sasl_password"):
            cluster.set_sasl_password(self.cleaned_data["sasl_password"])
        if commit:
            cluster.save()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterAdminForm
    list_display = ["name", "bootstrap_servers", "security_protocol", "enabled", "status", "last_poll_at"]
    list_filter = ["enabled", "status"]
    search_fields = ["name", "bootstrap_servers"]
    readonly_fields = ["status", "last_poll_at", "last_error", "password_set"]

    @admin.display(boolean=True, description="SASL password set")
    def password_set(self, obj: Cluster) -> bool:
        return obj.has_sasl_password
