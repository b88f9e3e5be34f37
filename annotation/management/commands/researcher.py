from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.services.accounts import researcher_set


class Command(BaseCommand):
    help = "Let an account create campaigns (add it to the 'researchers' group), or, with --revoke, no longer."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--revoke", action="store_true", help="make the account a labeler only again")

    def handle(self, *args, username: str, revoke: bool, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"There is no user {username!r}.")
        researcher_set(user=user, researcher=not revoke)
        if revoke:
            self.stdout.write(f"{username} labels but can no longer create campaigns (campaigns it owns stay its own).")
        else:
            self.stdout.write(f"{username} can now create campaigns.")
