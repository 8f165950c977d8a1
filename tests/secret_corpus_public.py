# ruff: noqa: E501, ISC004  (texts as their sources publish them: long lines, joined pieces)
"""Secrets and non-secrets taken from outside the project: the rule tests and test data of
two maintained scanners, as published (Kingfisher: mongodb/kingfisher's
crates/kingfisher-rules/data/rules/*.yml examples and testdata/*_vulnerable.*; gitleaks:
gitleaks/gitleaks's cmd/generate/config/rules/*.go true and false positives).

Nothing here was generated for Baton's rules, and the UNTOUCHED part (a fixed third, chosen
by a digest of each text, not by hand) is kept out of every tuning run: a change to
baton/secret_rules.py or baton/redaction.py is made looking at what TUNED leaks, and
UNTOUCHED is only ever reported (bench/redaction.py, docs/security.md).

A value that nothing in its carrier names and that cannot be told from a git object name (a
bare 40-character hex string) is left out: Baton keeps those by design (docs/security.md).
"""

from __future__ import annotations

import zlib

from tests.secret_corpus import Secret

_KINGFISHER = [  # (kind, value, text)
    ("curl-user", "P@ssw0rd$1", "curl --cacert ca.crt -u elastic:P@ssw0rd$1 https://localhost:9200"),
    ("curl-user", "yqDVtkqPECriaLRi", "curl -u developer:yqDVtkqPECriaLRi"),
    ("curl-user", "pQ9wTxu4Fg", "curl --user roger23@gmail.com:pQ9wTxu4Fg https://www.dropbox.com"),
    ("curl-header", "cfcabd11c7ed9a41b1a3e063c32d5114", 'curl -H "Authorization: Bearer cfcabd11c7ed9a41b1a3e063c32d5114"'),
    ("curl-header", "22cb987851bc5659229114c62e60c79abd0d2c08",
     'curl -H "Authorization: Token 22cb987851bc5659229114c62e60c79abd0d2c08"'),
    ("http-basic", "SWxqcmpxZDpld3B3IGdlZmhtZA==", "Authorization: Basic SWxqcmpxZDpld3B3IGdlZmhtZA=="),
    ("http-basic", "bXpnaGd6cTpsbmFrdWF6cXNx", "Authorization: Basic bXpnaGd6cTpsbmFrdWF6cXNx"),
    ("http-basic", "WnVtemZzcjptdWxtIHhyenJ6aQ==", "headers['Authorization'] = 'Basic WnVtemZzcjptdWxtIHhyenJ6aQ=='"),
    ("http-bearer", "d1fc83f09661bcaf3cb3591ec4b93fe93b07087ef020886a4ead09e8efd8c0df",
     "Authorization: Bearer d1fc83f09661bcaf3cb3591ec4b93fe93b07087ef020886a4ead09e8efd8c0df"),
    ("http-bearer", "7727d2fa5e8f7d37de25ef385ff8766d265ee2e7384efb311c04069d9c892c6b",
     "  - Bearer 7727d2fa5e8f7d37de25ef385ff8766d265ee2e7384efb311c04069d9c892c6b"),
    ("http-bearer", "4f8a2b6c1d9e7f30a5b2c8d4e6f1a3b7c9d2e8f4a6b0c5d1e9f3a7b2c4d6e8f0",
     "headers={'Authorization': 'Bearer 4f8a2b6c1d9e7f30a5b2c8d4e6f1a3b7c9d2e8f4a6b0c5d1e9f3a7b2c4d6e8f0'}"),
    ("url-credentials", "qyOIhJiM", "https://eaRIWNkE:qyOIhJiM@j2LYY414Q5cCYD"),
    ("azure-storage-key", "6jqh42QQjWWBwoPGGR/Jr0PZjhBMZVbHm/gkhEfHvOj8aV6+oI8ed6ZAAwB5a6993WqyQDiuJJB0QpseJwqYxw==",
     "# Azure Storage Connection String\nAzureWebJobsStorage=DefaultEndpointsProtocol=https;AccountName=hanatour9833;"
     "AccountKey=6jqh42QQjWWBwoPGGR/Jr0PZjhBMZVbHm/gkhEfHvOj8aV6+oI8ed6ZAAwB5a6993WqyQDiuJJB0QpseJwqYxw==;"
     "EndpointSuffix=core.windows.net\n"),
    ("azure-storage-key", "1gy3lpE7Du1j5ljKiupgKzywSw2isjsa69sfsdfsdsgfsgfdgfdgfd/YThisv/OVVLfIOv9kQ==",
     "DefaultEndpointsProtocol=http;AccountName=testacc1;\n"
     "AccountKey=1gy3lpE7Du1j5ljKiupgKzywSw2isjsa69sfsdfsdsgfsgfdgfdgfd/YThisv/OVVLfIOv9kQ==;\n"
     "BlobEndpoint=http://127.0.0.1:8440/testacc1;\n"),
    ("azure-shared-access-key", "S8ii67l3Gd1Ba69az78iP9UksewzhjvUfh1DIuDs30w=",
     '"IOTHUB_CONNECTION_STRING": {\n  "value": "HostName=d1-vi-ioth521.azure-devices.net;'
     'SharedAccessKeyName=registryReadWrite;SharedAccessKey=S8ii67l3Gd1Ba69az78iP9UksewzhjvUfh1DIuDs30w="\n}\n'),
    ("azure-storage-key", "NjEwGHd9+piK+iCi2C2XURWPmeDDjif9UKN1HAszYptL4iQ+yD7/dgjLMZc3VOpURsa53aJ4HZfbVWzL429C5g==",
     '"AZURE_STORAGE_CONNECTION_STRING": {\n  "value": "DefaultEndpointsProtocol=https;AccountName=d1biblobstor521;'
     'AccountKey=NjEwGHd9+piK+iCi2C2XURWPmeDDjif9UKN1HAszYptL4iQ+yD7/dgjLMZc3VOpURsa53aJ4HZfbVWzL429C5g==;'
     'EndpointSuffix=core.windows.net"\n}\n'),
    ("azure-app-configuration", "abCD1EF+GHIJxLMnOPqRSa53VWX05zaBCdE/fg9hi4k=",
     "Endpoint=https://foo-nonprod-appconfig.azconfig.io;Id=ABCD-E6-s0:tl6ABcdefGHi7kLMno/p;"
     "Secret=abCD1EF+GHIJxLMnOPqRSa53VWX05zaBCdE/fg9hi4k="),
    ("azure-app-configuration", "GcoEA53t7GLRNJ910M46IrbHO/Vg0tt4HujRdsaCoTY=",
     "Endpoint=https://appconfig-test01.azconfig.io;Id=09pv-l0-s0:opFCQMC6+9485xJgN5Ws;"
     "Secret=GcoEA53t7GLRNJ910M46IrbHO/Vg0tt4HujRdsaCoTY="),
    ("azure-app-configuration", "CQ+mlfQqkzfZv4XA53gigJ/seeXMKwNsqW/rM3wmtuE=",
     '        private static string appConfigurationConnectionString = "Endpoint=https://appcs-fg-pwc.azconfig.io;'
     'Id=pi5x-l9-s0:SZLlhHA53Nz2MpAl04cU;Secret=CQ+mlfQqkzfZv4XA53gigJ/seeXMKwNsqW/rM3wmtuE=";'),
    ("azure-devops-pat", "zpczok4kqgnw5prpfy3ehiylbqvgbjfkdiqkejsxqamy7qbkep7q",
     'var personalAccessToken = "zpczok4kqgnw5prpfy3ehiylbqvgbjfkdiqkejsxqamy7qbkep7q";  // Provide a value'),
    ("azure-devops-pat", "58oo4mvqr2tpw7b4w3loeckwfu5o6nw3sihfckvlwoxgqimlddza",
     '$token = "58oo4mvqr2tpw7b4w3loeckwfu5o6nw3sihfckvlwoxgqimlddza"'),
    ("azure-devops-pat", "iyfmob6xjrfmit67anxbot64umfx2clwx7dz5ynxi4q2z3uqegvq",
     'if __name__ == "__main__":\n    ado_pat =  "iyfmob6xjrfmit67anxbot64umfx2clwx7dz5ynxi4q2z3uqegvq"\n'),
    ("azure-container-registry", "Abcdefghijklmnopqrstuvwxyz123456789012ABCD+ACRefg123",
     "Abcdefghijklmnopqrstuvwxyz123456789012ABCD+ACRefg123"),
    ("azure-client-secret", "aBc4Q~xY9kLmNpQrStUvWxYz01234567890abcd", '"aBc4Q~xY9kLmNpQrStUvWxYz01234567890abcd"'),
    ("azure-client-secret", "xY14Q~abcdefghijklmnopqrstuvwxyz01234", "AZURE_CLIENT_SECRET=xY14Q~abcdefghijklmnopqrstuvwxyz01234"),
    ("azure-client-secret", "mZ8Q~V4x2pL7nR5sT9uW3yA6bC1dE0fG", 'AZURE_CLIENT_SECRET="mZ8Q~V4x2pL7nR5sT9uW3yA6bC1dE0fG"'),
    ("azure-client-secret", "4Px7_kQ2mN9vR3tY6wA8cD1eF5gH0jLs", "ENTRA_APP_SECRET: 4Px7_kQ2mN9vR3tY6wA8cD1eF5gH0jLs"),
    ("azure-client-secret", "N7vX2pQ9_rT4mL6sK8wC3dF5gH1jA0bZ",
     '{\n  "appId": "12345678-90ab-4cde-8f01-234567890abc",\n  "password": "N7vX2pQ9_rT4mL6sK8wC3dF5gH1jA0bZ",\n'
     '  "tenant": "11111111-2222-4333-8444-555555555555"\n}\n'),
    ("azure-access-token", "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU2Nzg5",
     "MS_GRAPH_TOKEN=eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJodHRwczovL2dyYXBoLm1pY3Jvc29mdC5jb20iLCJ0aWQiOiI3"
     "MmY5ODhiZi04NmYxLTQxYWYtOTFhYi0yZDdjZDAxMWRiNDciLCJvaWQiOiIxMTExMTExMS0yMjIyLTQzMzMtODQ0NC01NTU1NTU1NTU1NTUiLCJp"
     "ZHR5cCI6ImFwcCIsInJvbGVzIjpbIlVzZXIuUmVhZC5BbGwiXX0.YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU2Nzg5"),
    ("agora-app-certificate", "397a3af3db1950bdbd84f4e4ec18ebef", "agora.app_certificate=397a3af3db1950bdbd84f4e4ec18ebef"),
    ("agora-app-certificate", "127a3af3db1950b8dbd4fe440c28ebef", 'agora.app_secret = "127a3af3db1950b8dbd4fe440c28ebef"'),
    ("algolia-admin-key", "ij1mut5oe606wlrf5z4u8u31264z3gag", 'algolia_api_key = "ij1mut5oe606wlrf5z4u8u31264z3gag"'),
    ("clickup-token", "pk_204249739_138RCYNYCVO0GRJ8INODHFRMXN0QSV75",
     "CLICKUP_API_TOKEN=pk_204249739_138RCYNYCVO0GRJ8INODHFRMXN0QSV75"),
    ("clickup-token", "pk_204249739_GSJCPRLQEX43KH4WN8093RZ9DW3CJGM4",
     'clickup_token: "pk_204249739_GSJCPRLQEX43KH4WN8093RZ9DW3CJGM4"'),
    # testdata/generic_secrets.py: values assigned to names that say nothing (VAR_n, SOURCE_n)
    ("google-api-key", "AIzaSyBUPHAjZl3n8Eza66ka6B78iVyPteC5MgM", "VAR_6 = 'AIzaSyBUPHAjZl3n8Eza66ka6B78iVyPteC5MgM'"),
    ("recaptcha-secret", "6Lrjv_b_jgnybWRwKSn2P6lop58PGZ_NfewZWnRT", "VAR_7 = '6Lrjv_b_jgnybWRwKSn2P6lop58PGZ_NfewZWnRT'"),
    ("slack-app-token", "xapp-1-A01C259PH2A-1440755929120-7d5241948a2cc1b464add85df8a8e75f9040ae2869f6599926ed0b9dcafdb32b",
     "VAR_16 = 'xapp-1-A01C259PH2A-1440755929120-7d5241948a2cc1b464add85df8a8e75f9040ae2869f6599926ed0b9dcafdb32b'"),
    ("slack-bot-token", "xoxb-730191371696-1413868247813-IG7Z6nYevC2hdviE3aJhb5kY",
     "VAR_17 = 'xoxb-730191371696-1413868247813-IG7Z6nYevC2hdviE3aJhb5kY'"),
    ("slack-webhook", "PlVigT9jRstQd0ywnFP262DQ",
     "VAR_18 = 'https://hooks.slack.com/services/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'"),
    ("stripe-secret-key", "sk_live_bu9JFVJtII3FINL1rOKcNpveXD4hSMtSDx7opOWDEFGHIJKLMNOPQRSTUVWXYZ",
     "VAR_19 = 'sk_live_bu9JFVJtII3FINL1rOKcNpveXD4hSMtSDx7opOWDEFGHIJKLMNOPQRSTUVWXYZ'"),
    ("stripe-restricted-key", "rk_live_z59MoCJoFc114PpJlP1OnB1O", "VAR_21 = 'rk_live_z59MoCJoFc114PpJlP1OnB1O'"),
    ("facebook-access-token", "EAACEdEose0cBABNVIWZAPVEKXBR", "VAR_22 = 'EAACEdEose0cBABNVIWZAPVEKXBR'"),
    ("square-access-token", "sqOatp-TDt6aBq8Z_Oup1JezKC1cK", "VAR_23 = 'sqOatp-TDt6aBq8Z_Oup1JezKC1cK'"),
    ("braintree-access-token", "access_token$production$x0lb8affpzmmnufd$3ea7cb281754b7da7eca131ef9642324",
     "VAR_25 = 'access_token$production$x0lb8affpzmmnufd$3ea7cb281754b7da7eca131ef9642324'"),
    ("twilio-key", "SK5d1d319A6Acf7EC9BDeDb8CCe4D76BA8", "VAR_26 = 'SK5d1d319A6Acf7EC9BDeDb8CCe4D76BA8'"),
    ("twilio-key", "ACXvJ0lkU-BhvkmBkZPUWAxExvPSF6s5En", "VAR_27 = 'ACXvJ0lkU-BhvkmBkZPUWAxExvPSF6s5En'"),
    ("twilio-key", "APNLX3uzXotXDUKvurSeS95o8O3RpYuuy6", "VAR_28 = 'APNLX3uzXotXDUKvurSeS95o8O3RpYuuy6'"),
    ("mailgun-api-key", "key-LPxoYCANGEFkAMHBur4jTjbZ69ngpdbI", "VAR_29 = 'key-LPxoYCANGEFkAMHBur4jTjbZ69ngpdbI'"),
    ("generic-password", "GYW2mMmpG327BtrdTnUL", "DATABASE_PASSWORD = 'GYW2mMmpG327BtrdTnUL'"),
    ("generic-password", "opensaysme", "PASSWORD = 'opensaysme'"),
    ("generic-password", "postgres", "POSTGRES_PASSWORD = 'postgres'"),
    ("generic-api-key", "SGwJgqnZYzH945UBWnauBuKXKLEhq5Le", "API_KEY = 'SGwJgqnZYzH945UBWnauBuKXKLEhq5Le'"),
    ("generic-api-key", "897f3b11-72f2-4c6f-9a9d-4750cdc609c6", "APIKEY = '897f3b11-72f2-4c6f-9a9d-4750cdc609c6'"),
    ("generic-api-key", "7340ad40-09b3-11eb-adc1-0242ac120002", "ACCESS_TOKEN = '7340ad40-09b3-11eb-adc1-0242ac120002'"),
    ("bare-token", "GYW2mMmpG327BtrdTnUL", "SOURCE_1 = 'GYW2mMmpG327BtrdTnUL'"),
    ("bare-token", "SGwJgqnZYzH945UBWnauBuKXKLEhq5Le", "SOURCE_5 = 'SGwJgqnZYzH945UBWnauBuKXKLEhq5Le'"),
    # testdata/php_vulnerable.php, ruby_vulnerable.rb, toml_vulnerable.toml, csharp_vulnerable.cs
    ("php-assignment", "this_is_my_passport", "        $password = 'this_is_my_passport';"),
    ("php-assignment", "9823yrdfijo239jd3wsad30dj2d", "        $api_key = '9823yrdfijo239jd3wsad30dj2d';"),
    ("php-assignment", "kingpin987", '    $this->password = "kingpin987"'),
    ("aws-secret-key", "eD4++rSUVbOmDrRI7EDLmskuwpAAddEA0WNwu+fI", '$aws_secret = "eD4++rSUVbOmDrRI7EDLmskuwpAAddEA0WNwu+fI";'),
    ("php-assignment", "blink182", '$hidden_passphrase = "blink182";'),
    ("aws-access-key", "AKIA6ODU5DHT7VPXGCE4", '$key_id = "AKIA6ODU5DHT7VPXGCE4";'),
    ("ruby-assignment", "SGwJgqnZYzH945UBWnauBuKXKLEhq5Le", 'my_api_key = 1, "SGwJgqnZYzH945UBWnauBuKXKLEhq5Le", 3'),
    ("ruby-assignment", "17df97169af3785f2c0b2a73dhba1c46f33928de", "GITHUB_KEY = '17df97169af3785f2c0b2a73dhba1c46f33928de'"),
    ("ruby-assignment", "895b1da4051440395f90e1411c4a1150e423c922",
     "GITHUB_APP_SECRET = '895b1da4051440395f90e1411c4a1150e423c922'"),
    ("ruby-assignment", "secret123", 'aUser.send("password=", "secret123")'),
    ("toml-assignment", "ja4wALsaho20af21dS", 'my_private_key = "ja4wALsaho20af21dS"'),
    ("toml-assignment", "dG9wLVNlY3JldA==", 'my_unique_authorization_key = "dG9wLVNlY3JldA=="'),
    ("csharp-assignment", "s3cr3tp@ssw0rd", '    string password = new String("s3cr3tp@ssw0rd");'),
    ("csharp-assignment", "9043hfdlasf023", '    string passwd = new String("9043hfdlasf023");'),
    ("csharp-assignment", "a9lah209la81la3", '    string pwd = new String("a9lah209la81la3");'),
    ("csharp-assignment", "9043hfdlasf023", '    string password = "9043hfdlasf023";'),
    ("csharp-assignment", "a9lah209la81la3", '    string secret = "a9lah209la81la3";'),
    ("csharp-assignment", "402750613792034973", '    string secretKey = "402750613792034973";'),
    ("csharp-assignment", "ja4wALsaho20af21dS", '    string privateKey = "ja4wALsaho20af21dS";'),
]

_GITLEAKS = [  # cmd/generate/config/rules/curl.go and generic.go: true positives
    ("curl-user", "d2LkV78zLx!t", 'curl -u ":d2LkV78zLx!t" https://localhost:9200'),
    ("curl-user", "h0pk1ns~21s", "curl -sw '%{http_code}' -X POST --user  'johns:h0pk1ns~21s' $GItHUB_API_URL/$GIT_COMMIT --data"),
    ("curl-user", "yqDVtkqPECriaLRi", "sh-5.0$ curl -k -X POST https://infinispan:11222/rest/v2/caches/default/hello \\\n"
     "  -H 'Content-type: text/plain' \\\n  -d 'world' \\\n  -u developer:yqDVtkqPECriaLRi"),
    ("curl-user", "d2LkV78zLx!t", "curl -s --user 'api:d2LkV78zLx!t' \\\n"
     "    https://api.mailgun.net/v2/sandbox91d3515882ecfaa1c65be642.mailgun.org/messages"),
    ("curl-user", "dB2yF6@qL9vZm1P#4J", 'curl -s -v --user "j.smith:dB2yF6@qL9vZm1P#4J" "https://api.contoso.org/user/me"'),
    ("curl-user", "pRf7vG2h1L8nQkW9", "curl --user kevin:'pRf7vG2h1L8nQkW9' -iX PATCH -H \"Content-Type: application/json\" -d"),
    ("curl-user", "qgsnai0xokrw4j1", "$ curl https://api.dropbox.com/oauth2/token \\\n"
     "  --user c28wlsosanujy2z:qgsnai0xokrw4j1 --data grant_type=authorization_code"),
    ("curl-header", "5eb4223e-5008-46e5-be67-c7b8f2732305",
     "curl --header  'Authorization:  5eb4223e-5008-46e5-be67-c7b8f2732305'"),
    ("curl-header", "djJlNEpYa0NJUHZ5a2FWT0VRXzRqZmZUdDkwYTp2emNBZGFzZWpmlWZiUDc2VUJjNDNNVDExclVh",
     'curl -k -X POST --header "Authorization: Basic djJlNEpYa0NJUHZ5a2FWT0VRXzRqZmZUdDkwYTp2emNBZGFzZWpmlWZiUDc2VUJj'
     'NDNNVDExclVh" "https://api-qa.example.com:8243/token" -d "grant_type=client_credentials"'),
    ("curl-header", "MzUzYjMwMmM0NDU3NGY1NjUwNDU2ODdlNTM0ZTdkNmE6Mjg2OTI0Njk3ZTYxNWE2NzJhNjQ2YTQ5MzU0NTY0NmM=",
     'curl -X POST -H "Content-Type: application/json" \\\n -H "Authorization: Basic MzUzYjMwMmM0NDU3NGY1NjUwNDU2OD'
     'dlNTM0ZTdkNmE6Mjg2OTI0Njk3ZTYxNWE2NzJhNjQ2YTQ5MzU0NTY0NmM=" \\\n'
     "  -d '{\"user\":{\"emailAddress\":\"test@example.com\"}, \"password\":\"password\"}' \\\n"
     "  'http://localhost:8080/oauth2-provider/v1.0/users'"),
    ("curl-header", "YXBpOmtleS1hN2MzNDJ3MzNhNWQxLTU2M2U3MjlwLTZhYjI3YzYzNzM0Ng==",
     "#curl -X POST \\\n#  https://api.mailgun.net/v3/sandbox7dbcabccd4314c123e8b23599d35f5b6.mailgun.org/messages \\\n"
     "#  -H 'Authorization: Basic YXBpOmtleS1hN2MzNDJ3MzNhNWQxLTU2M2U3MjlwLTZhYjI3YzYzNzM0Ng==' \\\n"
     "#  -F to='joe@example.com' \\\n#  -F subject='Hello'"),
    ("curl-header", "cfcabd11c7ed9a41b1a3e063c32d5114",
     '# curl -X GET "http://localhost:3000/api/cron/status" -H "Authorization: Bearer cfcabd11c7ed9a41b1a3e063c32d5114"'),
    ("curl-header", "jC+6TUUjCNHcVtAXpcqBCgxnA8r+qD6MatnYaf/+289y7HWpK0BWPyLHv/K4DMN32fufwmeVVjlo8zjgBh8kx3GfS6IqO70w1DVMSC",
     "curl -X PUT -H 'Authorization: Bearer jC+6TUUjCNHcVtAXpcqBCgxnA8r+qD6MatnYaf/+289y7HWpK0BWPyLHv/K4DMN32fufwmeVVjlo8"
     "zjgBh8kx3GfS6IqO70w1DVMSCTwX7fhEpiXaxzv0mhSMHDX9Kw63Q6DkavUWUV+MDNhCF5wGQrcdQNncVRF3YkuDHDT/xw2YWyZ/DX8k+gAYiC8"
     "gcD8Ueg0ljBVS1IDwPjuGoFPESJVxYr0MDPF2D8Pn2S5rq692U4D9ZLuluS46VA4DK6ig5P7QM5XVXi4V7vXM8qpN/zqneyz+w4PUh6NIX7QG6J"
     "czMhYd9maWRWVat5jDdyII63P6sNAy9QZjw+ClW211Q==' -d 'user={\"account\":\"user@domain.com\"}' "
     "http://127.0.0.1:8443/desks/1/occupy"),
    ("curl-header", "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",
     'curl https://api.openai.com/v1/chat/completions \\\n  -H "Content-Type: application/json" \\\n'
     '  -H "Authorization: Bearer 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" \\'),
    ("curl-header", "_FXNljbSRYMWx3TWrd7lgKhLtVZX6iskC8Wcbb4b",
     'curl -X GET "https://api.cloudflare.com/client/v4/user/tokens/verify" \\\n'
     '     -H "Authorization: Bearer _FXNljbSRYMWx3TWrd7lgKhLtVZX6iskC8Wcbb4b" \\\n'
     '     -H "Content-Type:application/json"'),
    ("curl-header", "sha256~bRLFnzd59Z3XpZH5_seJPHALOuvbWiKwbFKSsoALkgp",
     'curl -H "Authorization: Bearer sha256~bRLFnzd59Z3XpZH5_seJPHALOuvbWiKwbFKSsoALkgp"'),
    ("curl-header", "22cb987851bc5659l29114c62e60c79abd0d2c08",
     'curl -H "Authorization: Api-Token 22cb987851bc5659l29114c62e60c79abd0d2c08" --request PUT '
     "https://appsecclass.report/api/use/635"),
    ("curl-header", "kvRPfjAhLhtRTczoRgctVGp7KY1QVH3UBZM-gM0x8ec",
     'curl -L -H "Authorization:eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJjb25maWRlbmNlIjowLjh9.kvRPfjAhLhtRTczoRgctVGp7K'
     'Y1QVH3UBZM-gM0x8ec" service1.local -> correct jwt '),
    ("curl-header", "c4ed6c21-9dd5-4a05-8e3f-c56d1151cce8",
     'curl -X GET \\\n     -H "apikey: c4ed6c21-9dd5-4a05-8e3f-c56d1151cce8" \\\n     -H "Accept: application/json" \\'),
    ("curl-header", "3fea6af1349166ea",
     'curl -XPOST http://localhost:8080/api/tasks -H "Content-Type: application/x-www-form-urlencoded; charset=UTF-8" '
     '-H "Token: 3fea6af1349166ea" -d "content=hello-curl"'),
    ("curl-header", "3a16750d-d363-41a4-8ebd-035408f7730f",
     'curl -X GET https://octopus.corp.net/\n     -H "X-Octopus-ApiKey: 3a16750d-d363-41a4-8ebd-035408f7730f" \\'),
    ("generic-api-key", "6da89121079f83b2eb6acccf8219ea982c3d79bccc3e9c6a85856480661f8fde",
     '"client_secret" : "6da89121079f83b2eb6acccf8219ea982c3d79bccc3e9c6a85856480661f8fde",'),
    ("generic-api-key", "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB", 'generic_api_token = "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"'),
    ("generic-api-key", "CLOJARS_34bf0e88955ff5a1c328d6a7491acc4f48e865a7b8dd4d70a70749037443",
     "generic_api_token: CLOJARS_34bf0e88955ff5a1c328d6a7491acc4f48e865a7b8dd4d70a70749037443"),
]

NEGATIVES_PUBLIC = [  # the same sources' false positives and non-secrets, to come back byte for byte
    "GITHUB_COMMIT_SHA_HASH = '120ba2f7db8affd023e83964e5d8afbd10d20fe8'",
    "COMMIT_SHA = '637831c685a5f906c65d6af8389e7988619a3514'",
    "LATEST = '699865bd61fda628b0bea3080ae73d5f11572a74'",
    "PUBLIC_KEY_SSH = 'AAAAB3NzaC1yc2EAAAADAQABAAAAgQCqGKukO1De7zhZj6+H0qtjTkVxwTCpvKe4eCZ0FPqri0cb2JZfXJ/DgYSF6vUpwmJG8w"
    "VQZKjeGcjDOL5UlsuusFncCzWBQ7RKNUSesmQRMSGkVb1/3j+skZ6UtW+5u09lHNsj6tQ51s1SPrCBkedbNf0Tp0GbMJDyR4e9T04ZZw=='",
    "-----BEGIN PUBLIC KEY-----\nMIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCqGKukO1De7zhZj6+H0qtjTkVxwTCpvKe4eCZ0\n"
    "FPqri0cb2JZfXJ/DgYSF6vUpwmJG8wVQZKjeGcjDOL5UlsuusFncCzWBQ7RKNUSesmQRMSGkVb1/\n"
    "3j+skZ6UtW+5u09lHNsj6tQ51s1SPrCBkedbNf0Tp0GbMJDyR4e9T04ZZwIDAQAB\n-----END PUBLIC KEY-----",
    "client_vpn_endpoint_id = aws_ec2_client_vpn_endpoint.client-vpn-endpoint.id",
    "golang.org/x/oauth2 v0.15.0 h1:s8pnnxNVzjWyrvYdFUQq5llS1PX2zhPXmccZv99h7uQ=",
    "google.golang.org/api v0.81.0 h1:o8WF5AvfidafWbFjsRyupxyEQJNUWxLZJCK5NXrxZZ8=",
    '   curl -sL --user "$1:$2" "$3" > "$4"',
    'curl -u "${_username}:${_password}"',
    'curl -u "${username}":"${password}"',
    'curl -k -X POST -I -u "SRVC_JENKINS:${APPID}"',
    "curl -sw '%{http_code}' -X POST --user '$USERNAME:$PASSWORD' $GItHUB_API_URL/$GIT_COMMIT --data",
    'curl -XGET -i -u "${{ env.ELK_ID }}:${{ build.env.ELK_PASS }}"',
    'curl -XGET -i -u "${{ steps.vault.outputs.account_id }}:${{ steps.vault.outputs.account_password }}"',
    'curl -X POST --user "$(cat ./login.txt):$(cat ./password.txt)"',
    'curl --silent --insecure --user ${f5user}:${f5pass} \\',
    'curl -u "myusername" http://localhost:15130/api/check_user/',
    'curl -X GET \\\n     -H "apikey: $API_KEY" \\\n     -H "Accept: $FORMAT" \\',
    '    -H "Authorization: Bearer $API_KEY" \\',
    'curl -X GET -H "Content-Type: application/json" -H "Authorization: Bearer $(gcloud auth print-access-token)" '
    "https://workflowexecutions.googleapis.com/v1/projects/244283331594/locations/us-central1/workflows/sample-workflow/"
    "executions/43c925aa-514a-44c1-a0a4-a9f8f26fd2cb/callbacks/1705791f-d446-4e92-a6d0-a13622422e80_31864a51-8c13-4b03-"
    "ad4d-945cdc8d0631",
    'AZURE_TENANT_ID="72f988bf-86f1-41af-91ab-2d7cd011db47"',
    '"appId": "12345678-90ab-4cde-8f01-234567890abc"',
    "AzureAd: { clientId: fedcba98-7654-4321-8fed-cba987654321 }",
    "myregistry.azurecr.io",
    'algolia_app_id = "WRB8YLFW7Y"',
    'string ipAddress = new String("8.8.8.8");',
    "valueFrom.secretKeyRef.name = \"mysecrets\"",
    'name = "vvp.auth.oidc.registration.clientSecret"',
    "echo $x_object->$property1; //Return 'Value 2'",
]


# A second round from three more sources, added whole before Baton was run on any of them:
# Yelp/detect-secrets's plugin tests (tests/plugins/keyword_test.py, keyword_xml_test.py,
# high_entropy_strings_test.py, ibm_cloud_iam_test.py, softlayer_test.py,
# ibm_cos_hmac_test.py, cloudant_test.py, box_test.py, aws_secret_access_key_test.py),
# trufflesecurity/trufflehog's detector pattern tests (alchemy, aha, airtable personal
# access token, abyssale, adobeims, azure app configuration) and more of gitleaks's rules
# (django, aws_secret, hashicorp_vault, kubernetes, database: its password alphabet).
# Its own untouched third (same digest rule) is UNTOUCHED_MORE, reported apart.
_V = "m{{h}o)p${e]nob(ody[finds>-_$#thisone}}"  # detect-secrets's keyword and XML tests' secret
_IBM = "abcd1234abcd1234abcd1234ABCD1234ABCD1234--__"
_SL = "abcd1234abcd1234abcd1234abcd1234abcd1234abcd1234abcd1234abcd1234"
_COS = "1234567890abcdef1234567890abcdef1234567890abcdef"
_BOX = "12345678abcdefgh12345678ABCDEFGH"
_URLSAFE = "I6FwzQZFL9l-44nviI1F04OTmorMaVQf9GS4Oe07qxL_vNkW6CRas4Lo42vqJMT0M6riJfma_f-pTAuoX2U="
_IMS_ACCESS = ("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ0eXBlIjoiYWNjZXNzX3Rva2VuIiwiY2xpZW50X2lkIjoidGVzdGNsaWVudDEyMyIsImFzIjoiaW1zLW5hMSJ9"
               ".AAABBBCCCDDDEEEFFFGGGHHHIIIJJJKKKLLLMMMNNNOOOPPPQQQRRRSSST")
_IMS_REFRESH = ("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ0eXBlIjoicmVmcmVzaF90b2tlbiIsImNsaWVudF9pZCI6InRlc3RjbGllbnQxMjMiLCJhcyI6Imltcy1uYTEifQ"
                ".AAABBBCCCDDDEEEFFFGGGHHHIIIJJJKKKLLLMMMNNNOOOPPPQQQRRRSSST")
_MORE = [  # (kind, value, text)
    ("go-assignment", _V, f'apikey := "{_V}"'),
    ("go-assignment", _V, f"apikey:={_V}"),
    ("json-assignment", _V, f'"theapikey": "{_V}"'),
    ("yaml-assignment", _V, f"apikey: {_V}"),
    ("objective-c-assignment", _V, f'apikey = @"{_V}"'),
    ("dict-assignment", _V, f'some_dict["secret"] = "{_V}"'),
    ("shell-assignment", _V, f"my_password = {_V}"),
    ("quoted-statement", _V, f"private_key '{_V}';"),
    ("quoted-statement", _V, f'fooapikeyfoo "{_V}";'),
    ("xml-element", _V, f"<the_password>{_V}</the_password>"),
    ("xml-attribute", _V, f'<sometag name="the_password" value="{_V}" />'),
    ("xml-attribute", _V, f'<sometag value="{_V}" name="the_password"/>'),
    ("xml-element", _V, f'<sometag name="the_password">{_V}</sometag>'),
    ("xml-attribute", _V, f'<the_password value="{_V}"/>'),
    ("xml-attribute", _V, f'<sometag the_password="{_V}"/>'),
    ("high-entropy-base64url", _URLSAFE, f"'{_URLSAFE}'"),
    ("high-entropy-base64url", _URLSAFE, f'String #1: "Zrm-ySTAq7D2sHk="; String #2: "{_URLSAFE}"'),
    ("ibm-cloud-iam-key", _IBM, f"ibm-cloud_api_key: {_IBM}"),
    ("ibm-cloud-iam-key", _IBM, f'IBM-API-KEY : "{_IBM}"'),
    ("ibm-cloud-iam-key", _IBM, f'"iam-password": "{_IBM}"'),
    ("ibm-cloud-iam-key", _IBM, f"IBMCLOUDIAMAPIKEY={_IBM}"),
    ("ibm-cloud-iam-key", _IBM, f'"ibm-iam_key" := "{_IBM}"'),
    ("ibm-cloud-iam-key", _IBM, f"ibm-cloud-pwd = {_IBM}"),
    ("softlayer-api-key", _SL, f'--softlayer-api-key "{_SL}"'),
    ("softlayer-api-key", _SL, f"--softlayer-api-key={_SL}"),
    ("softlayer-api-key", _SL, f"http://api.softlayer.com/soap/v3/{_SL}"),
    ("softlayer-api-key", _SL, f"SLAPIKEY : {_SL}"),
    ("softlayer-api-key", _SL, f'sl_pass="{_SL}"'),
    ("softlayer-api-key", _SL, f"slapikey:= {_SL}"),
    ("ibm-cos-hmac-secret", _COS, f'"secret_access_key": "{_COS}"'),
    ("ibm-cos-hmac-secret", _COS, f'COS_HMAC_SECRET_ACCESS_KEY = "{_COS}"'),
    ("ibm-cos-hmac-secret", _COS, f'cos-hmac_secret_key = "{_COS}"'),
    ("cloudant-password", _SL, f"https://testy_-test:{_SL}@testy_-test.cloudant.com/_api/v2/"),
    ("cloudant-password", _SL, f"cloudant_pw='{_SL}'"),
    ("cloudant-api-key", "abcdefghijabcdefghijabcd", 'cloudant_key = "abcdefghijabcdefghijabcd"'),
    ("box-client-secret", _BOX, f'"clientSecret": "{_BOX}"'),
    ("box-client-secret", _BOX, f"CLIENT-SECRET={_BOX}"),
    ("box-client-secret", _BOX, f'"clientsecret":="{_BOX}"'),
    ("aws-secret-key", "DcCc9H6oCkGUSp3Rhmsx8NIfVG8kO2T/3jORxuZY", "some_secret_key=DcCc9H6oCkGUSp3Rhmsx8NIfVG8kO2T/3jORxuZY"),
    ("aws-secret-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret  =   wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
    ("aws-secret-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_thingy: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
    ("aws-secret-key", "lbqlNh3FW5/3AwnBoWsYIJam9w2Us4ZOH5Un8RyR", 'AWSSecret = "lbqlNh3FW5/3AwnBoWsYIJam9w2Us4ZOH5Un8RyR"'),
    ("aws-secret-key", "lbqlNh3FW5/3AwnBoWsYIJam9w2Us4ZOH5Un8RyR", "awssecret: lbqlNh3FW5/3AwnBoWsYIJam9w2Us4ZOH5Un8RyR"),
    ("alchemy-token", "3aBcDFE5678901234567890_1a2b3c4d", "alchemy_token = '3aBcDFE5678901234567890_1a2b3c4d'"),
    ("aha-api-key", "81a1411a7e276fd88819df3137eb406e0f281f8a8c417947ca4b025890c8541c",
     "[INFO] sending request to the aha.io API\n[DEBUG] using key = 81a1411a7e276fd88819df3137eb406e0f281f8a8c417947ca4b025890c8541c\n"
     "[DEBUG] using host = example.aha.io\n[INFO] response received: 200 OK\n"),
    ("airtable-token", "patfqpIZBPU6EAt5x.458546d9c77b21f8a98141f2a4039d5626010f19efc16c20d57c4f41d44c8c85",
     "[INFO] Sending request to the airtable API\n"
     "[DEBUG] Using Key=patfqpIZBPU6EAt5x.458546d9c77b21f8a98141f2a4039d5626010f19efc16c20d57c4f41d44c8c85\n[INFO] Response received: 200 OK\n"),
    ("airtable-token", "pat2kATFGrujqJTbT.e2082656c470902d83b47dc804e693df1deb30161affbda39d879a2cf44bef13",
     "<com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>\n  <scope>GLOBAL</scope>\n  <id>{airtable}</id>\n"
     "  <secret>{airtable AQAAABAAA pat2kATFGrujqJTbT.e2082656c470902d83b47dc804e693df1deb30161affbda39d879a2cf44bef13}</secret>\n"
     "  <description>configuration for production</description>\n</com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>\n"),
    ("abyssale-api-key", "rWE8I0axy6Fvw40RE8tsNS3L7zBU5vAhEnW4hq9G",
     "[INFO] Sending request to abyssale API\n[DEBUG] Using API_KEY=rWE8I0axy6Fvw40RE8tsNS3L7zBU5vAhEnW4hq9G\n[INFO] Response received: 200 OK\n"),
    ("abyssale-api-key", "xTiPNSDg6JjzG8fWoLb8JlE8SBcMKkCx2fZLZD91",
     "<com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>\n  <scope>GLOBAL</scope>\n  <id>{abyssale}</id>\n"
     "  <secret>{abyssale AQAAABAAA xTiPNSDg6JjzG8fWoLb8JlE8SBcMKkCx2fZLZD91}</secret>\n"
     "</com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>\n"),
    ("adobe-ims-token", _IMS_ACCESS, f'{{"access_token": "{_IMS_ACCESS}", "token_type": "bearer"}}'),
    ("adobe-ims-token", _IMS_ACCESS, f"ACCESS_TOKEN={_IMS_ACCESS}"),
    ("adobe-ims-token", _IMS_REFRESH, f'{{"refresh_token": "{_IMS_REFRESH}"}}'),
    ("azure-app-configuration", "80DtxZkndXpM2mV2J1JjX2vL1x4gm1hHn8Y3JeFJ4N0PPLSO5D70JQQJ99BBAC1i4FpQkb5wAAACAAZC26dr",
     "Endpoint=https://trufflesecurity.azconfig.io;Id=u+De;Secret=80DtxZkndXpM2mV2J1JjX2vL1x4gm1hHn8Y3JeFJ4N0PPLSO5D70JQQJ99BBAC1i4FpQkb5wAAACAAZC26dr"),
    ("django-secret-key", "django-insecure-123456789!%_&*^)abcdef", 'SECRET_KEY = "django-insecure-123456789!%_&*^)abcdef"'),
    ("vault-token", "s.ZC9Ecf4M5g9o34Q6RkzGsj0z", "token: s.ZC9Ecf4M5g9o34Q6RkzGsj0z"),
    ("vault-token", "hvs.CAESIP2jTxc9S2K7Z6CtcFWQv7-044m_oSsxnPE1H3nF89l3GiYKHGh2cy5sQmlIZVNyTWJNcDRsYWJpQjlhYjVlb1cQh6PL8wEYAg",
     '-vaultToken hvs.CAESIP2jTxc9S2K7Z6CtcFWQv7-044m_oSsxnPE1H3nF89l3GiYKHGh2cy5sQmlIZVNyTWJNcDRsYWJpQjlhYjVlb1cQh6PL8wEYAg"'),
    ("vault-token", "hvb.AAAAAQJgxDgqsGNorpoOR7hPZ5SU-ynBvCl764jyRP_fnX7WvkdkDzGjbLNGdPdtlY33Als2P36yDZueqzfdGw9RsaTeaYXSH7E4RYSWuRoQ9YRKIw8o7mDDY2ZcT3KOB7RwtW1w1FN2eDqcy_sbCjXPaM1iBVH-mqMSYRmRd2nb5D1SJPeBzIYRqSglLc31wUGN7xEzyrKUczqOKsIcybQA",
     "hvb.AAAAAQJgxDgqsGNorpoOR7hPZ5SU-ynBvCl764jyRP_fnX7WvkdkDzGjbLNGdPdtlY33Als2P36yDZueqzfdGw9RsaTeaYXSH7E4RYSWuRoQ9YRKIw8o7mDDY2ZcT3KOB7RwtW1w1FN2eDqcy_sbCjXPaM1iBVH-mqMSYRmRd2nb5D1SJPeBzIYRqSglLc31wUGN7xEzyrKUczqOKsIcybQA"),
    ("kubernetes-secret", "AAAAAAAAAAC7hjsA+H3owFygUv4w5B67lcSx14zff9FCPADiNbSwYWgE+O7Dhiy5tkRecs21ljjofvebe6xsYlA4cVmght0=",
     "\napiVersion: v1\nkind: Secret\ndata:\n\tpassword: AAAAAAAAAAC7hjsA+H3owFygUv4w5B67lcSx14zff9FCPADiNbSwYWgE+O7Dhiy5tkRecs21ljjofvebe6xsYlA4cVmght0="),
    ("kubernetes-secret", "bXlwYXNzd29yZA==",
     "\napiVersion: v1\nkind: Secret\nmetadata:\n  name: heketi-secret\n  namespace: default\ndata:\n"
     '  # base64 encoded password. E.g.: echo -n "mypassword" | base64\n  key: bXlwYXNzd29yZA=='),
    ("kubernetes-secret", "UyFCXCpkJHpEc2I9",
     "apiVersion: v1\ndata:\n\tpassword: UyFCXCpkJHpEc2I9\n\tusername: YWRtaW4=\nkind: Secret\nmetadata:\n"
     "\tcreationTimestamp: '2022-06-28T17:44:13Z'\n\tname: db-user-pass\n\tnamespace: default\ntype: Opaque"),
    ("kubernetes-secret", "YWRtaW46cGFzc3dvcmQ=",
     'apiVersion: "v1"\ndata:\n\textra: "YWRtaW46cGFzc3dvcmQ="\nkind: "secret"\nmetadata:\n\tname: "secret-sa-sample"\n'
     '\tannotations:\n\t\tkubernetes.io/service-account.name: "sa-name"'),
    ("kubernetes-secret", "eyJhdXRocyI6eyJodHRwczovL2V4YW1wbGUvdjEvIjp7ImF1dGgiOiJvcGVuc2VzYW1lIn19fQo=",
     "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-dockercfg\ntype: kubernetes.io/dockercfg\ndata:\n  .dockercfg: |\n"
     "    eyJhdXRocyI6eyJodHRwczovL2V4YW1wbGUvdjEvIjp7ImF1dGgiOiJvcGVuc2VzYW1lIn19fQo=\n"),
    ("kubernetes-secret", "UyFCXCpkJHpEc2I9",
     "apiVersion: 'v1'\nkind: 'Secret'\ndata:\n\tpassword: 'UyFCXCpkJHpEc2I9'\n\tusername: 'YWRtaW4='\nmetadata:\n"
     "\tname: 'db-user-pass'\n\tnamespace: 'default'\ntype: 'Opaque'"),
    ("database-password", "eKs7Vm6;c@3V$3YwhnpW", "DB_PASSWORD=eKs7Vm6;c@3V$3YwhnpW"),
    ("database-password", "tmu@;qX<Ix", 'db_passwd: "tmu@;qX<Ix"'),
    ("database-password", "WighxhvLJj=nhm6QQ}4vqkOgIVxj$oM;U3f81kTqltNn,24esa", "pwd: WighxhvLJj=nhm6QQ}4vqkOgIVxj$oM;U3f81kTqltNn,24esa"),
]


# A third round, added whole before Baton was run on any of it: semgrep/semgrep-rules's
# generic/secrets/security/detected-*.txt (and .npmrc, .php, .jsx) rule tests, each `ruleid:`
# line, as stored at the files' commits (4201d0e4adc2a63a1a0b22074ca3acef8978856d and others).
# Left out by design: a bare UUID (snyk), `xxxx` placeholders (artifactory, npm) and a value
# shorter than 6 (sshpass 'blah'). Its untouched third (same digest rule) is UNTOUCHED_SEMGREP.
_ONFIDO = "abc123ABC-_.abc123ABC-_abc123ABC-_abc123ABC-"
_SESSION = ("FQoGZXIvYXdzENv//////////wEaDEeLj11xTbnBk6azRCKsAacCiJK85DSXExJ81GtHrkEyev8eedQcFY4EoM00PsD1FAEMOfzQclVEFsoh9Y4ZHUjgGmCPRUnYCLNc2NnHkadvmI"
            "+MT7jRRa1Mo2HA/HYStOOwEyfXFYG91MNj9rVXXXXXXXXA6+7FF6jcxj3cr1U9CDB9hjW+jGq4UgjxXXXXXXXCoIidDjl4Z911zIzP/Q+FYA1R2CUz5Y32EUaMzR+bQvmheUolLOq3wU=")
_CODECLIMATE = "746b31b417ecc5cff872bac5746b31b417ecc5cff872bac51234567890abcdef"
_SEMGREP = [  # (kind, value, text)
    ("generic-api-key", "1234567890123456789012345678901234567890", "api_key=1234567890123456789012345678901234567890"),
    ("generic-api-key", "123567890123456789012345678901234567890", "APIKEY : 123567890123456789012345678901234567890"),
    ("generic-secret", "1234567890123456789012345678901234567890", "secret=1234567890123456789012345678901234567890"),
    ("generic-secret", "123567890123456789012345678901234567890", "SECRET: 123567890123456789012345678901234567890"),
    ("heroku-api-key", "A6264401-E60A-48A9-941F-6446E78EC164", "HEROKU_API_KEY = A6264401-E60A-48A9-941F-6446E78EC164"),
    ("heroku-api-key", "a6264401-e60a-48a9-941f-6446e78ec164", "heroku_api_key = a6264401-e60a-48a9-941f-6446e78ec164"),
    ("sauce-token", "034e1d2a-681a-4a52-bfa3-256b72c356c0", "SAUCE_ACCESS_KEY=034e1d2a-681a-4a52-bfa3-256b72c356c0"),
    ("sauce-token", "034E1D2A-681A-4A52-BFA3-256B72C356C0", "sauce_access_key:034E1D2A-681A-4A52-BFA3-256B72C356C0"),
    ("github-token", "4a68631afb82ba1a9f9c49892e0e3c82eaa7ef66", 'GitHubPAT = "4a68631afb82ba1a9f9c49892e0e3c82eaa7ef66"'),
    ("npm-registry-auth", "stvtaW46YWRtaW4=", "_auth = stvtaW46YWRtaW4="),
    ("npm-registry-auth", "27dfe8d8-889b-4380-92ff-9c3c6ea5d478",
     "//registry.npmjs.org/:_authToken=27dfe8d8-889b-4380-92ff-9c3c6ea5d478"),
    ("npm-registry-auth", "CorrectHorseBatteryStaple", "//somewhere-else.com/another:_auth=CorrectHorseBatteryStaple"),
    ("npm-registry-auth", "CorrectHorseBatteryStaple", "//acme.npm/releases:_password=CorrectHorseBatteryStaple"),
    ("aws-secret-access-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEFUCDlEKEY",
     "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEFUCDlEKEY"),
    ("aws-session-token", _SESSION,
     "export AWS_ACCESS_KEY_ID=AKIAI44QH8DHBEXAMPLE\nexport AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
     f"export AWS_SESSION_TOKEN={_SESSION}\naws ec2 describe-instances --region us-west-1\n"),
    ("sonarqube-token", "e884618bb0f2ca8744f5b5e0e6f9d2f61bce7e8f", "sonar.login=e884618bb0f2ca8744f5b5e0e6f9d2f61bce7e8f"),
    ("sonarqube-token", "1234567890abcdef1234567890abcdef12345678", 'sonar.token: "1234567890abcdef1234567890abcdef12345678"'),
    ("sonarqube-token", "abcdef01234567890abcdef01234567890abcdef", "SONAR_TOKEN = abcdef01234567890abcdef01234567890abcdef"),
    ("telegram-bot-token", "12345678:AA101703Wd8JLT6GCtKzxatRHQREQUk_CpK",
     "define('BOT_TOKEN', '12345678:AA101703Wd8JLT6GCtKzxatRHQREQUk_CpK');\n"
     "define('API_URL', 'https://api.telegram.org/bot'.BOT_TOKEN.'/');"),
    ("picatic-api-key", "sk_live_a6afaeada6a1a8a3a6a5a1a2aca1aea7",
     "          user.apiKey ? user.apiKey : 'sk_live_a6afaeada6a1a8a3a6a5a1a2aca1aea7'"),
    ("picatic-api-key", "sk_live_a6afaeada6a1a8a3a6a5a1a2aca1aea7",
     '        placeholder="sk_live_a6afaeada6a1a8a3a6a5a1a2aca1aea7"'),
    ("twilio-api-key", "SK575796bb721246b5fe003bcc32ebde77", "SK575796bb721246b5fe003bcc32ebde77"),
    ("codeclimate-token", _CODECLIMATE, f"CODECLIMATE_URL=https://codeclimate.com\nCODECLIMATE_API_TOKEN={_CODECLIMATE}"),
    ("codeclimate-token", _CODECLIMATE, f'CODECLIMATE_API_TOKEN="{_CODECLIMATE}"'),
    ("kolide-api-key", "k2sk_v1_K2UYhW7OPt2jKKLqmFacGNK7", "k2sk_v1_K2UYhW7OPt2jKKLqmFacGNK7"),
    ("hockeyapp-key", "ac4fbb5fa9ae7de11f4c8150394ac543", '<string name="hockeyapp_key">ac4fbb5fa9ae7de11f4c8150394ac543</string>'),
    ("onfido-api-token", f"api_live.{_ONFIDO}", f"api_live.{_ONFIDO}"),
    ("onfido-api-token", f"api_live_ca.{_ONFIDO}", f"api_live_ca.{_ONFIDO}"),
    ("onfido-api-token", f"api_live_us.{_ONFIDO}", f"api_live_us.{_ONFIDO}"),
    ("composio-api-key", "ak_jI60uPF6adMkCuBFESjq", 'COMPOSIO_API_KEY="ak_jI60uPF6adMkCuBFESjq"'),
    ("composio-api-key", "ak_Qbez9ytnft9XyXAGPL0-", "key = 'ak_Qbez9ytnft9XyXAGPL0-'"),
    ("composio-api-key", "oak_iuGvTZ4eiiy3umBWjwTt", "COMPOSIO_ORG_KEY=oak_iuGvTZ4eiiy3umBWjwTt"),
    ("composio-api-key", "uak_TRFvy_o-mFznI3IyljByM5LL-SudKFv47vULpKuK2ai",
     "x-user-api-key: uak_TRFvy_o-mFznI3IyljByM5LL-SudKFv47vULpKuK2ai"),
    ("amazon-mws-auth-token", "amzn.mws.00a19111-8311-5311-5391-5e211cbfcd5c", "amzn.mws.00a19111-8311-5311-5391-5e211cbfcd5c"),
    ("slack-webhook", "abcd1234efgh5678ijkl90zy", "https://hooks.slack.com/services/T12345678/B12345678/abcd1234efgh5678ijkl90zy"),
    ("slack-webhook", "abcd1234efgh5678ijkl90zy", "https://hooks.slack.com/services/T12345678/B1234567890/abcd1234efgh5678ijkl90zy"),
]
# The same files' `ok:` lines, to come back byte for byte (but those under a credential's
# name, `COMPOSIO_API_KEY=ak_test`, `aws_secret_access_key:...SAMPLEKEY`: redacted by design).
SEMGREP_NEGATIVES = [
    '  integrity_hash_css: "sha256-AP1AyUTbi2szylgr+hmNHrzRCf9tD/miZyoHS5obTRR9BMY="',
    'ImageID: "SHA256:AP1AyUTbi2szylgr266fcae00707e67a2545ef34f9a29354585f93dac906749"',
    "X-JFrog-Art-Api: $PASSWORD",
    "go.mod h1:6dJC0mAP4ikYIbvyc7fijjWJddQyLn8Ig3JB5CqoB9Q=",
    '{\n    "integrity": "sha512-12345678APAjZas32d1f32a1sd2fasdfasdf32a1sd32f1a3s2d1feeeeeeeeee=="\n}',
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\nAP6xxxxxxxxxx\n-----END PGP PUBLIC KEY BLOCK-----",
    "apiVersion: appprotectdos.f5.com/v1beta1\nkind: APDosLogConf\nmetadata:\n  name: doslogconf",
    "uses: SonarSource/sonarqube-scan-action@713881670b6b3676cda39549040e2d88c70d582e",
    "image: sonarqube:community@sha256:160bd2f6a3485bd09b655ef22dd63c02bd1fa7ba82aa5d9973fd010b8bcca0b3",
    "pkg:githubactions/SonarSource/sonarqube-scan-action@713881670b6b3676cda39549040e2d88c70d582e",
    "cmdInput := fmt.Sprintf(\"sshpass -p '%s'\", password)",
    "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    "SKblah",
    '  resolved "https://registry.yarnpkg.com/saucelabs/-/saucelabs-1.5.0.tgz#9405a73c360d449b232839919a86c396d379fd9d"',
]


# Text that looks random and is not a secret, one or two of each kind the issue names, each
# written from its kind's public format (npm and yarn lock files, the SRI, go.sum and OCI
# digest formats, RFC 4122, the ULID spec's own example, PEP 440 and SemVer, GitHub Actions
# and Docker lines): measured by bench/redaction.py, at most 3 may be altered
# (tests/test_redaction_corpus.py). Written before the redactor was run on them.
HARD_NEGATIVES = [  # (kind, text)
    ("integrity hash", '      "integrity": "sha512-5M53BsOqcReBM10CEzSaGC4lddbxUMy9v+iLQ8GPQl2d27nb8yuN8GHr8JhtKZe3H3AIIBvsdZDfCqO8lqGa6Q==",'),
    ("integrity hash", '  integrity sha1-h4DCNQJXG46Z43JZ3ss5MnWoUfw='),
    ("integrity hash", '<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.3/dist/js/bootstrap.min.js" '
                       'integrity="sha384-8ey/tsDewavxqzBlkT6qcgkKMmK5VcH85m3hMur/zR1ftziSMjhltpF07GvoPCB5" crossorigin="anonymous"></script>'),
    ("base64 of prose", "echo VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw== | base64 -d"),
    ("base64 of prose", "message: RGVwbG95bWVudCBmaW5pc2hlZCBmb3IgY2hlY2tvdXQgc2VydmljZSBpbiBldS13ZXN0LTE="),
    ("CamelCase with digits", "the fix is in Ec2InstanceMetadataV2TokenProvider and Http2StreamResetHandler"),
    ("CamelCase with digits", "renamed TestOAuth2ClientCredentialsGrantV3 to test the s3 path"),
    ("a variable", 'export PYPI_TOKEN="${{ secrets.PYPI_API_TOKEN_2024 }}" DB_URL=${DATABASE_URL_PRIMARY_V2}'),
    ("a variable", "curl -H \"Authorization: Bearer ${GITHUB_TOKEN}\" https://api.github.com/user"),
    ("git object name", "git cherry-pick 0f98b1f7eda33a4e9cfaab09506aa8094044085f after 3f9c2e1"),
    ("git object name", "tree 459bfe1a59f3d0db3e975ff3180dc4a2bc178fca3bac550ee6ada930be11863a in a sha256 repository"),
    ("prefixed digest", "FROM python:3.11-slim@sha256:7b88c7e10751cd1ab166b1059ae569ff259c5ba7da9622d6b9ad16b6d8a7b3c0"),
    ("prefixed digest", "requests==2.32.3 --hash=sha256:141615f1293c72aa2718a7be0ddaaeef2355c6f0b5e149cc32c8ba74b8a9e6e2"),
    ("go.sum line", "github.com/stretchr/testify v1.8.4 h1:8y414lpQ+hRCfni/YSGBBZrY1HeLWScUf7KHwCqllyw="),
    ("go.sum line", "github.com/stretchr/testify v1.8.4/go.mod h1:JMt9TVAu4nRsOE0hNBbclt65cZ3A9brnFlO89sRZI5w="),
    ("UUID", "request_id=21875fb0-03cd-4565-8197-25b9c280822e failed with 503"),
    ("ULID", "event 01ARZ3NDEKTSV4RRFFQ69G5FAV replayed"),
    ("version string", "pip installed torch-2.3.1+cu121-cp311-cp311-linux_x86_64.whl and 1.2.3-rc.1+build.20240611.5114f85"),
    ("version string", "git describe: v2.43.0-rc1-123-g9fceb02, maven 1.0.0-20240611.123456-3"),
    ("path", "see /home/runner/work/_temp/9dd4e461268c8034f5c8564e155c67a6/cache/pip-wheel-2x7k9m3q/output.log"),
    ("path", r"C:\Users\build\AppData\Local\Temp\pytest-of-build\pytest-42\test_sync0\stores\registry.sqlite3"),
    ("URL without credentials", "https://github.com/acme/shop/actions/runs/9524135722/job/26257352123#step:4:18"),
    ("URL without credentials", "https://storage.googleapis.com/acme-artifacts/builds/2024-06-11/checkout-7d9f8c6b5d-x2k9p.tar.gz?generation=1718099999123456"),
    ("identifier of words", "test_kafka_consumer_rebalances_after_partition_reassignment_v2 and MAX_RETRIES_BEFORE_CIRCUIT_OPENS_3"),
    ("identifier of words", "arn:aws:iam::123456789012:role/GitHubActionsDeployRole2024 assumed by checkoutServiceV2Worker"),
    # semgrep-rules's detected-telegram-bot-api-key.php `ok:` line: a go.mod hash behind `11:`, not `h1:`
    ("mangled digest", "define('GO.MOD', 'github.com/gorilla/mux v1.7.4/go.mod 11:AAbg23sWSpFRCP0SfiEN6jmj59UnWan46BH5rLB7');"),
]

# A fourth round from two more sources, added whole before Baton was run on any of it, its
# split (the same digest rule, each source alike) fixed before: trufflesecurity/trufflehog's
# detector pattern tests as stored (pkg/detectors/<name>/<name>_test.go, each "valid
# pattern" input: a log line and a Jenkins credential's XML) of the detectors after those of
# the second round in the alphabet whose stored test holds a literal (abuseipdb,
# accuweather v2, adafruitio, adobeio, adzuna, agora, airship, airtableoauth, aiven,
# alegra; the others read their secrets from a vault), and gitleaks/gitleaks's own scan
# test data (testdata/archives/files/.env.prod and api.go). Its untouched third is
# UNTOUCHED_4TH.
def _log(line: str) -> str:
    return f"[INFO] Sending request to the API\n[DEBUG] {line}\n[INFO] Response received: 200 OK"


def _jenkins(id_: str, secret: str) -> str:
    return ("<com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>\n  <scope>GLOBAL</scope>\n"
            f"  <id>{{{id_}}}</id>\n  <secret>{{{secret}}}</secret>\n"
            "  <description>configuration for production</description>\n"
            "  <creationDate>2023-05-18T14:32:10Z</creationDate>\n  <owner>jenkins-admin</owner>\n"
            "</com.cloudbees.plugins.credentials.impl.StringCredentialsImpl>")


_AIVEN = ("yb+Ygm82FfUworm2exB+Uk255p0uQKmmfx4ut1KfsZ3YI3Gp2xPYyxZgrwYabMxXXO4WPsK7xlLJRy0BWIpM2SKnzA2p69P8aOmYbl24ZiVGlLXyQxeVDDy7gru5Yzt=Y1UDLBpsW=hhGIKsrPgc/7hpxuEfEqbXJe5IBYO484F+ekaTmYN4nTF94O==3WuG+WuSW7zaYzXH1V==kZFj07zBtmShS0z/lW=N3HipH=oJjXI2pyFxU+A7vM9yHdUHoiZEOVoWsyp5zO1ajBOqFr=3jIIaXWmbH33dP2ZNQFJhqbeg6JlXA9GpfMFht5=ZCC1IirWCNp=UILbmZtvu9d2M8U0YNHwAGKtjrPS5lZvAU+W5s2Ti")
_AIVEN_XML = ("IGhXNR6g7rogABp/H2iDQu7TgkXpvn9KnwzJfeh+8p7M=JVsI2QoQ38mmQHt450bQC4wBOGFhV+9QT2KGWSMfTOxTUrUXygaLlwsXo/RBxKXyOdh=/L8EGGrqG6=qbd0UzDAfc0xeAfXd30RGj+Ypsrrvdda=ZPa32BBID5r2ClfJSbgpfWIpVC1b5vlqCdy5LIWABZJzjBC5VweqZ04XFaCh+15NuSQ4E0KdGwPdkrfxxjY20I1wDvlKxzxL7dfCly3KVlQv7KBEFSLaLRNRocPYToUXqU4yAXKvXf03K=k1mahpxFUp94c35k/n055LVs=xbyL6AKdW=sCCa1AFIYKBDMBprTsZ6Al7DHx=XA6qLNWYxS7")
_AIRTABLE = ("oaajtCy2lVMUN1Cm5.v1.eyJ1c2VySWQiOiJ1c3JjQ09QVlJudGlrU1lzdyIsImV4cGlyZXNBdCI6IjIwMjUtMDItMDNUMTk6NTY6MzcuMDAwWiIsIm9hdXRoQXBwbGljYXRpb25JZCI6Im9hcG14aXcyUlRrVGlzcHJIIiwic2VjcmV0IjoiMzczNThlNzdlZjlhMjljY2Q5MWIwNmNlNTdkZDYxNDg0MWVmNmIyOWYwYjQ5ZWE0MTMxZGI4NzBkNTAzYTE1NyJ9.0d67c8b334048135a93615610445e4aa90c6af6222392b49eea9419e1d6717d0")
_AIRTABLE_2 = ("oaaRYiYSlTFXZzxDM.v1.eyJ1c2VySWQiOiJ1c3JjQ09QVlJudGlrU1lzdyIsIm9hdXRoQXBwbGljYXRpb25JZCI6Im9hcG14aXcyUlRrVGlzcHJIIiwiZXhwaXJlc0F0IjoiMjAyNS0wMS0yOVQwMDowMTo0NC4wMDBaIiwic2VjcmV0IjoiZjYyOWE1MWVkM2M0ZjU5ODlmOTcyMDU1ZjkwODk3NDA4NmU0NjQxY2JhODU5Y2FhZTJkZjliMWQwODg0ZjIzMiJ9.27a8998029ac9bdd599b435572821dcb63c60cbf62b9cb2ba2a73511e5553d66")
_AGORA = ("agora credentials\n\tthese are some example credentails for login.\n\tuse these to login.\n"
          "\tkey: asdf0987mnbv1234qsxojb6ygb2wsx0o\n\tsecret: beqr7215fr4g6bfjkmnvxrtygb2wsxap\n"
          "\tloginUrl: https://www.agora.com/example_login\n")
_FOURTH = [  # (kind, value, text)
    ("abuseipdb", "o8oqti3tghu2xic76ii4t7jb9bxuzd4200j1yrkdjl6s8834hx4dgz1wwo90diqraakjd13sljcjkfnf",
     _log("Using API_KEY=o8oqti3tghu2xic76ii4t7jb9bxuzd4200j1yrkdjl6s8834hx4dgz1wwo90diqraakjd13sljcjkfnf")),
    ("abuseipdb", "zgtj0q3v38u4pthc6nmy02n60bj244u5o9j47ln1jlue5mxzaasfi29x4dzcbxroawvkm26thtr61066",
     _jenkins("abuseipdb", "abuseipdb AQAAABAAA zgtj0q3v38u4pthc6nmy02n60bj244u5o9j47ln1jlue5mxzaasfi29x4dzcbxroawvkm26thtr61066")),
    ("accuweather", "Qh6DP6Zf7vHtmnDDsbS219qcz4d883Y9", _log("Using API_KEY=Qh6DP6Zf7vHtmnDDsbS219qcz4d883Y9")),
    ("accuweather", "BJDD9bYh8bR586Wcw3F1lvkUYy3RZZbD",
     _jenkins("accuweather", "accuweather AQAAABAAA BJDD9bYh8bR586Wcw3F1lvkUYy3RZZbD")),
    ("adafruitio", "aio_VxEqGaqgMgZej3DceezbBy03eWyW", _log("Using API_KEY=aio_VxEqGaqgMgZej3DceezbBy03eWyW")),
    ("adafruitio", "aio_cQD77DF9SgsYbgWcxJbpLOlR5emX", _jenkins("adafruitio", "AQAAABAAA aio_cQD77DF9SgsYbgWcxJbpLOlR5emX")),
    ("adobeio", "zoaw0c0m50m0hz2h1fm21y4tqfyl7ifi",
     _log("Using adobe KEY=zoaw0c0m50m0hz2h1fm21y4tqfyl7ifi\n[DEBUG] Using adobe ID=qCRbiIy1NJaW")),
    ("adobeio", "siybmtkgho9nsgjhng5yhp92wnir2a9t", _jenkins("adobe ftd7hkeafk0q", "adobe AQAAABAAA siybmtkgho9nsgjhng5yhp92wnir2a9t")),
    ("adzuna", "smcud4y6elxx7u6q58ewwv8rq01hpi3f",
     _log("Using adzuna KEY=smcud4y6elxx7u6q58ewwv8rq01hpi3f\n[DEBUG] Using adzuna ID=cxu9w2g6")),
    ("adzuna", "atubvgvpd6jjo0ac1wjianofnpgr24ac", _jenkins("adzuna svkit0wx", "adzuna AQAAABAAA atubvgvpd6jjo0ac1wjianofnpgr24ac")),
    ("agora", "asdf0987mnbv1234qsxojb6ygb2wsx0o",
     "agora key='asdf0987mnbv1234qsxojb6ygb2wsx0o' - secret='beqr7215fr4g6bfjkmnvxrtygb2wsxap'"),
    ("agora", "beqr7215fr4g6bfjkmnvxrtygb2wsxap", f"agora data='{_AGORA}'"),
    ("airship", "O3BV99CUDw3xYUAL0tHGYUe7mOj5PA5vTnLdJwULCTh9dxk9PmmTpL1kI846G3QGIsECVyVSsxZnIbfSwWc8xuX843W",
     _log("Using Key=O3BV99CUDw3xYUAL0tHGYUe7mOj5PA5vTnLdJwULCTh9dxk9PmmTpL1kI846G3QGIsECVyVSsxZnIbfSwWc8xuX843W")),
    ("airship", "oVH3yIO1oAoXpK9Rc01EGNNTuw6d4Zyt07YNFmje644Ht00hvAaYwldNOV9vIPQw6dYHJLRgp2f75YdJ9OiICkYVhMI",
     _jenkins("airship", "airship AQAAABAAA oVH3yIO1oAoXpK9Rc01EGNNTuw6d4Zyt07YNFmje644Ht00hvAaYwldNOV9vIPQw6dYHJLRgp2f75YdJ9OiICkYVhMI")),
    ("airtable-oauth", _AIRTABLE, _log(f"Using Key={_AIRTABLE}")),
    ("airtable-oauth", _AIRTABLE_2, _log(f"Using Key={_AIRTABLE}\n[ERROR] Response received: 401 UnAuthorized\n[DEBUG] Using Key={_AIRTABLE_2}")),
    ("aiven", _AIVEN, _log(f"Using Key = {_AIVEN}")),
    ("aiven", _AIVEN_XML, _jenkins("aiven", f"aiven AQAAABAAA {_AIVEN_XML}")),
    ("alegra", "wdvn-usa87a-fxp9ioas",
     _log("Using alegra Key=wdvn-usa87a-fxp9ioas\n[DEBUG] Using alegra Email = testUser.1005@example.com")),
    ("alegra", "buihlmkfnh5m1lk5z6do", _jenkins("alegra kk18@example.com", "alegra AQAAABAAA buihlmkfnh5m1lk5z6do")),
    ("dotenv", "8ae31cacf141669ddfb5da",
     "DB_HOST=example.com\nDB_PORT=443\nDB_USERNAME=postgres\nDB_PASSWORD=8ae31cacf141669ddfb5da\nDB_NAME=best_db\nDB_SSL=true"),
    ("aws-access-key", "AKIALALEMEL33243OLIA",
     '\t// opps I added a secret at line 20\n\tawsToken := "AKIALALEMEL33243OLIA"\n\n\tf := "apple"\n\tfmt.Println(f)'),
]

# A fifth round, added whole before Baton was run on any of it, its split (the same digest
# rule) fixed before: praetorian-inc/noseyparker's rule examples
# (crates/noseyparker/data/default/builtin/rules/generic.yml, http.yml, jenkins.yml and
# odbc.yml), each `examples:` entry as published, and the `negative_examples:` that Nosey
# Parker marks as secrets it misses (FIXME) or that hold a secret by Baton's rules (a quoted
# or unquoted value under a password's name). Left out: values shorter than 6 characters
# (`admin`, `pyne`), the bare word `secret` as a password, `######` and `XXXX` placeholders.
# Its negative examples that hold no secret (references, code, routes) are NOSEYPARKER_NEGATIVES.
# Its untouched third is UNTOUCHED_5TH.
_SUPER = "super$ecret"
_NOSEYPARKER = [  # (kind, value, text)
    ("generic-secret", "6fb1cff7690db9ac066cadbbde8e3c078efdabcf",
     '    private static String CLIENT_SECRET = "6fb1cff7690db9ac066cadbbde8e3c078efdabcf";'),
    ("azure-client-secret", "5pX8Q~MmTI8OMBJFVqMlFR4DE3Spz6Qm.xO.Gbf-", "    client_credential='5pX8Q~MmTI8OMBJFVqMlFR4DE3Spz6Qm.xO.Gbf-'"),
    ("generic-secret", "abcdefg12346+FJQCK", "    secret_access_key = 'abcdefg12346+FJQCK'"),
    ("generic-password", "H7IKC85R#@4$", "    Ldap password               ----   H7IKC85R#@4$"),
    ("generic-api-key", "951bc382db9abad29c68634761dd6e19", 'API_KEY = "951bc382db9abad29c68634761dd6e19"'),
    ("generic-api-key", "951bc382db9cfee29c68634761dd6e19",
     "buildConfigField 'String' , 'API_KEY' , '\"951bc382db9cfee29c68634761dd6e19\"'\tAPI_KEY\t"),
    ("generic-password", "1qay@WXS????",
     "credential = UsernamePasswordCredential(\n    client_id='da34859b-2ae4-48c3-bfe0-1b28b7cf2eed',\n"
     "    username='donjuandemarco',\n    password='1qay@WXS????',\n    tenant_id='bc877b20-f135-4c13-a266-8ed26b8f0f4b')\n"),
    ("generic-password", "`123QWERasdf",
     "hostname = '10.11.12.13'\nusername = 'donjuandemarco@example.com'\npassword = '`123QWERasdf'\n"),
    ("generic-password", "`123QWERasdf",
     "hostname = '10.11.12.13'\nUSERNAME = 'donjuandemarco@example.com'\n# some comment\n# some other comment\nPASS = '`123QWERasdf'\n"),
    ("generic-password", "abuser123456", "user = 'abuser'  # some comment\npassword = 'abuser123456'  # some other comment\n"),
    ("generic-password", "open sesame", "user = 'Aladdin'\npassword = 'open sesame'\n"),
    ("generic-password", "open_sesame", "user = Aladdin\npassword = open_sesame\n"),
    ("generic-password", "open_sesame", "user = Aladdin\n// some comment\n// some other comment\npassword = open_sesame\n"),
    ("generic-password", "open_sesame", "user = 'Aladdin'\npassword = 'open_sesame'\n"),
    ("generic-password", _SUPER, 'password = "super$ecret"\n'),
    ("generic-password", _SUPER, 'password="super$ecret"\n'),
    ("generic-password", _SUPER, 'my_password: "super$ecret"\n'),
    ("generic-password", _SUPER, '"password": "super$ecret",\n'),
    ("generic-password", _SUPER, 'my_password := "super$ecret"\n'),
    ("generic-password", _SUPER, 'password   =>   "super$ecret"\n'),
    ("generic-password", _SUPER, "password = super$ecret\n"),
    ("generic-password", _SUPER, "password = 'super$ecret'\n"),
    ("generic-password", "thisismypassword",
     '"ApplicationServicesConnection" : {\n    "ServiceAddress" : "https://services-dev.examples.com",\n'
     '    "AdminPassword" : "thisismypassword"\n}\n'),
    ("generic-password", "thisismypassword", 'private const string DevFolkoosComPfxPassword = "thisismypassword";\n'),
    ("generic-password", "YOURPASSWROD", '"password": "YOURPASSWROD"\n'),
    ("generic-password", "Pass123!@#",
     "  create_random_name('sfrp-cli-cert2', 24),\n              'cluster_name': self.create_random_name('sfrp-cli-', 24),\n"
     "              'vm_password': \"Pass123!@#\",\n              'policy_path': os.path.join(TEST_DIR, 'policy.json')\n          })\n"),
    ("generic-password", "4ian1234", ":password       => '4ian1234',\n"),
    ("generic-password", "52VeZqtHDCdAr5yM", "common.then_log_in({username: 'geronimo', password: '52VeZqtHDCdAr5yM'});\n"),
    ("generic-password", "thisismypassword",
     "beta => {\n  host            => 'foo.example.com',\n  user            => 'joe',\n  password        => 'thisismypassword',\n}\n"),
    ("dotnet-credential", "vzihlaquknriqlht",
     'sender.Credentials = new NetworkCredential("NuGets@example.com", "vzihlaquknriqlht");\n'),
    ("dotnet-credential", "AP7JaG9ToerxBc6gWP5LcU2CNpb",
     '$webClient.Credentials = new-object System.Net.NetworkCredential("cidownload", "AP7JaG9ToerxBc6gWP5LcU2CNpb");\n'),
    ("dotnet-credential", "Rrhh1234", 'new DirectoryEntry("LDAP://EXAMPLE.COM",\n          "ADMNALRRHH@EXAMPLE.COM",\n          "Rrhh1234");\n'),
    ("dotnet-config", "Prestigitariu$",
     '<add key="FromEmailAddress" value="killer.joe@example.com"/>\n<add key="FromEmailPassword" value="Prestigitariu$"/>\n'),
    ("dotnet-config", "#gets0m3",
     '<add key="ConnectionString_B2B" value="Server=awsbman-t,1433;Database=B2B;User ID=b2buser;Password=#gets0m3;Trusted_Connection=False" />\n'),
    ("dotnet-config", "eyJ0eXAiOiAiVENWMiJ9.RkNWLXdXS3M1RVBfencxM4A0WmJzdVlCQzFj.OGY1OWRkNGMtYTUxYS04ZDYwLWFiZGYtZWE5MWFhZWJiODhh",
     '<add key="ClearTextPassword" value="eyJ0eXAiOiAiVENWMiJ9.RkNWLXdXS3M1RVBfencxM4A0WmJzdVlCQzFj.OGY1OWRkNGMtYTUxYS04ZDYwLWFiZGYtZWE5MWFhZWJiODhh" />'),
    ("generic-password", "Secret123", "echo \"Rrun 'bin/ipa_kinit admin' to acquire a Kerberos ticket\"\necho \"The password is 'Secret123'\"\n"),
    ("generic-password", "blooberry", "The Blooby has a default Access Point Name 'Blooby'\nThe default Password is 'blooberry'\n"),
    ("generic-password", "centipede",
     'so at this point, just fill in your mount point name, ensure the password is "centipede" and press the "On" button!\n'),
    ("http-basic", "QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
    ("http-bearer", "mF_9.B5f-4.1JqM", "GET /resource HTTP/1.1\nHost: server.example.com\nAuthorization: Bearer mF_9.B5f-4.1JqM\n"),
    ("jenkins-token", "11811f784531053132519844d047186074",
     "jenkins_user = 'root'\n# jenkins_passwd = '116365fd86d63bf507aba962606a5c8956'  Pre token\n"
     "jenkins_passwd = '11811f784531053132519844d047186074'   # Dev Token\njenkins_url = 'http://10.1.188.121'\n"),
    ("jenkins-token", "11f4274ec59be12eace9a08b08ee13d54b",
     "export JENKINS_USER=justin-admin-edit-view\nexport JENKINS_TOKEN=11f4274ec59be12eace9a08b08ee13d54b\n"
     "export JENKINS=jenkins-cicd.apps.sno.openshiftlabs.net\n"),
    ("jenkins-crumb", "440561953171ba44ace9740562d172bb",
     "sh \"curl -X POST 'http://jenkins.lsfusion.luxsoft.by/job/${Paths.updateParentVersionsJob}/build' --user ${USERPASS} "
     "-H 'Jenkins-Crumb:440561953171ba44ace9740562d172bb'\"\n"),
    ("jenkins-token", "df490bc6-ef6e-4f6a-99a0-b03d26cb56f9",
     '// Jenkins query token\nreadonly static string jenkinsToken = "df490bc6-ef6e-4f6a-99a0-b03d26cb56f9";\n'),
    ("odbc-password", "goodspec",
     '//Database Info\\r\\n\\t\\t\\t\\t\\t$host = \\"localhost\\";\\r\\n\\t\\t\\t\\t\\t$database = \\"NHOHVA\\";\\r\\n\\t\\t\\t\\t\\t$user = \\"mg1021\\";              $password = \\"goodspec\\";'),
    ("odbc-password", "goodspec",
     '//Database Info\\r\\n\\t\\t\\t\\t\\t$host = \\"localhost\\";\\r\\n\\t\\t\\t\\t\\t$database = \\"NHOHVA\\";\\r\\n\\t\\t\\t\\t\\t$user = \\"mg1021\\";              $password = goodspec;'),
    ("odbc-password", "myPassword",
     "Data Source=190.190.200.100,1433;Network Library=DBMSSOCN;Initial Catalog=myDataBase;User ID=myUsername;Password=myPassword;"),
    ("odbc-password", "myPassword",
     "Data Source=190.190.200.100,1433;Network_library=DBMSSOCN;Initial Catalog=myDataBase;User ID=myUsername;Password=myPassword;"),
    ("odbc-password", "myPassword", "Provider=SQLNCLI;Server=myServerName,myPortNumber;Database=myDataBase;Uid=myUsername;Pwd=myPassword;"),
    ("odbc-password", "specialbill_user",
     '    adoConn.Open("Provider=SQLOLEDB.1;User ID=specialbill_user; " & "Password =specialbill_user;Initial Catalog=SpecialBill_PROD;Data Source=uszdba01;")'),
    ("odbc-password", "sK!g2Ex_=jJ6Gx5v",
     '<add name="DevQATrucks" connectionString="Server=hookupsqlqa1\\gpkqa; Database=YogurtDelay: User Id=kmwulfliq; password= sK!g2Ex_=jJ6Gx5v" providerName="System.Data.SqlClient" />'),
]
NOSEYPARKER_NEGATIVES = [
    "USERNAME=donjuan\nPASSWORD=$($(dirname $0)/../bin/get-django-setting LOCAL_DATABASE_PASSWORD)\n",
    'name="ws_plugin__s2member_amazon_s3_comp_files_access_key" id="ws-plugin--s2member-amazon-s3-comp-files-access-key"',
    'sb.append("MasterUserPassword: " + getMasterUserPassword() + ",");\n',
    'export PGPASSWORD="$gdcapi_db_password"\n',
    'define wget::authfetch($source,$destination,$user,$password="",$timeout="0",$verbose=false) {\n',
    "- echo 'export DATABASE_PASSWORD=\"'$PRECOMPILE_PASSWORD'\"' >> .env\n",
    '"/en/enterprise/3.0/authentication/keeping-your-account-and-data-secure/creating-a-strong-password":"/en/enterprise-server@3.0/auth"\n',
    "as: 'cms_user_password'\n  get '/passwords/:id/edit' => \"cms/sites/passwords#edit\", as: 'edit_password'\n"
    "  put '/forgot-password' => \"cms/sites/passwords#update\", as: 'update_password'\nend\n",
    'IAMUserChangePassword = "arn:aws:iam::aws:policy/IAMUserChangePassword"\n',
    'this.addPassword = "#add-password";\n',
    "echo 'password = '.$p['config']['daemon_password'].\"\\n\";\n",
    'usernameLabel:"Username or email:",passwordLabel:"Password:",rememberMeLabel:"Remember me:"\n',
    "this.addPassword = '#add-password';\n",
    "1. ~~Does not play well with [Build Token Root Plugin](https://wiki.jenkins-ci.org/display/JENKINS/Build+Token+Root+Plugin) URL formats.~~ "
    "(added with [this commit](https://github.com/morficus/Parameterized-Remote-Trigger-Plugin/commit/f687dbe75d1c4f39f7e14b68220890384d7c5674)  )",
    "\"driver={SQL Server};server=(#{datastore['DBHOST']});database=#{datastore['DBNAME']};uid=#{datastore['DBUID']};pwd=#{datastore['DBPASSWORD']}\"\n",
    "def login(self, user = '', password = '', domain = ''):",
    'if datastore[\'VERBOSE\']\n      text  = \'\'\n      text << "User=#{username}, "\n      text << "Password=#{password}, "\n'
    '      text << "Domain=#{domain}, "\n      text << "Full Name=#{full_name}, "\n      text << "E-mail=#{e_mail}"\n      print_good(text)\n',
    "if (len < ulen + wlen + 2)\n  break;\nuser = (char *) (p + 1);\npwd = (char *) (p + ulen + 2);\np += ulen + wlen + 2;\n",
    'System.out.println("Here we go...");\n          String url = "jdbc:msf:sql://127.0.0.1:8080/sample";\n'
    '          String userid = "userid";\n          String password = "password";\n',
    "char *domain = NULL;\nchar *user = NULL;\nchar *password = NULL;\n",
    '<?php\n        \\$user = \\$_POST[\\"username\\"];\n        \\$pwd = \\$_POST[\\"password\\"];\n        \\$otherdata = \\$_POST[\\"otherdata\\"];\n?>\n',
]


def _split(entries: list[tuple[str, str, str]]) -> tuple[list[Secret], list[Secret]]:
    tuned: list[Secret] = []
    untouched: list[Secret] = []
    for kind, value, text in entries:
        assert value in text, (kind, value)
        (untouched if zlib.crc32(text.encode()) % 3 == 0 else tuned).append(Secret(kind, value, text))
    return tuned, untouched


TUNED, UNTOUCHED = _split(_KINGFISHER + _GITLEAKS)
_TUNED_MORE, UNTOUCHED_MORE = _split(_MORE)
_TUNED_SEMGREP, UNTOUCHED_SEMGREP = _split(_SEMGREP)
_TUNED_4TH, UNTOUCHED_4TH = _split(_FOURTH)
_TUNED_5TH, UNTOUCHED_5TH = _split(_NOSEYPARKER)
TUNED += _TUNED_MORE + _TUNED_SEMGREP + _TUNED_4TH + _TUNED_5TH
PUBLIC: list[Secret] = TUNED + UNTOUCHED + UNTOUCHED_MORE + UNTOUCHED_SEMGREP + UNTOUCHED_4TH + UNTOUCHED_5TH
NEGATIVES_PUBLIC += SEMGREP_NEGATIVES + NOSEYPARKER_NEGATIVES
