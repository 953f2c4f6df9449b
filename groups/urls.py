from django.urls import path

from groups import views

urlpatterns = [
    path("", views.home, name="home"),
]
