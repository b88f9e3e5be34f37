"""Prolific's hook deliveries (§8 of the protocol): verified, recorded once, acted on by Celery."""

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from annotation.channels.services.prolific import prolific_event_receive


@csrf_exempt  # signed by Prolific (HMAC over timestamp and body), not by a browser session
@require_POST
def prolific_hook(request, account_id):
    status, text = prolific_event_receive(account_id=account_id, headers=request.headers, raw_body=request.body)
    return HttpResponse(text, status=status, content_type="text/plain")
