from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from groups.models import Cluster


@login_required
def home(request):
    return render(request, "groups/home.html", {"clusters": Cluster.objects.all()})
