"""The local control plane's certificates: one CA, the API server's serving certificate, an admin
client certificate and the service-account signing key, all for loopback names only; and the
webhooks' certificates: Kueue's in the layout its own certificate controller keeps, JobSet's and
Trainer's for the controllers to serve."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

VALIDITY = datetime.timedelta(days=30)
"""A local cluster lives for a test session or a try-out; a month is plenty and expires by itself."""
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_ADDRESSES = ("127.0.0.1",)
API_SERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
"""The names in-cluster clients use for the API server (its Service), beside loopback."""


@dataclass(frozen=True)
class Pki:
    """Paths of the files ``write_pki`` made."""

    folder: Path

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.folder / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.folder / "admin.key"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "service-account.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.folder / "service-account.pub"



def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key, path: Path) -> None:
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _certificate(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
                 names: tuple[str, ...] = (), addresses: tuple[str, ...] = (), client: bool = False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
    else:
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names or addresses:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(cert, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def write_pki(folder: Path) -> Pki:
    """Make every certificate and key the control plane needs in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder)
    ca_key = _key()
    ca_name = _name("eks-gpu-training-local-ca")
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    _write_key(ca_key, pki.ca_key)
    _write_cert(ca, pki.ca_cert)

    server_key = _key()
    _write_key(server_key, pki.apiserver_key)
    _write_cert(_certificate(_name("kube-apiserver"), server_key, ca_name, ca_key,
                             names=LOOPBACK_NAMES + API_SERVER_NAMES, addresses=LOOPBACK_ADDRESSES), pki.apiserver_cert)

    # system:masters: the controllers and the tests act as cluster admins; RBAC still judges every
    # ServiceAccount the platform creates, which is what the tests impersonate.
    admin_key = _key()
    _write_key(admin_key, pki.admin_key)
    _write_cert(_certificate(_name("eks-gpu-training-local-admin", "system:masters"), admin_key, ca_name, ca_key,
                             client=True), pki.admin_cert)

    # The API server verifies service-account tokens with RS256 by default.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(sa_key, pki.service_account_key)
    pki.service_account_public_key.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ))

    return pki


KUEUE_CA_NAME, KUEUE_CA_ORGANIZATION = "kueue-ca", "kueue"
"""Kueue's certificate controller (open-policy-agent/cert-controller) keeps the certificates in its
Secret only when the CA verifies for ``kueue-ca``, the server certificate for
``<service>.<namespace>.svc``, both past its 90-day look-ahead, and the CA key is PKCS#1 RSA; else
it makes its own."""
KUEUE_VALIDITY = datetime.timedelta(days=365)


def kueue_webhook_secret_data(service_dns_name: str) -> dict[str, bytes]:
    """``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` for Kueue's webhook Secret: a CA of its own
    and a serving certificate for its Service name and for 127.0.0.1, where it listens here."""
    return webhook_certificates(service_dns_name, KUEUE_CA_NAME, KUEUE_CA_ORGANIZATION)


def webhook_certificates(service_dns_name: str, ca_name: str, ca_organization: str) -> dict[str, bytes]:
    """``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``: a CA named ``ca_name`` and a serving
    certificate it signed for ``service_dns_name`` and for 127.0.0.1, where a webhook listens here."""
    now = datetime.datetime.now(datetime.timezone.utc)

    def sign(builder, key):
        return (builder.serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + KUEUE_VALIDITY).sign(key, hashes.SHA256()))

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer = _name(ca_name, ca_organization)
    ca = sign(x509.CertificateBuilder().subject_name(issuer).issuer_name(issuer).public_key(ca_key.public_key())
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=True, data_encipherment=False,
                                           key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
              .add_extension(x509.SubjectAlternativeName([x509.DNSName(ca_name)]), critical=False), ca_key)
    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server = sign(x509.CertificateBuilder().subject_name(_name(service_dns_name)).issuer_name(issuer)
                  .public_key(server_key.public_key())
                  .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                  .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                  .add_extension(x509.SubjectAlternativeName(
                      [x509.DNSName(service_dns_name)] + [x509.IPAddress(ipaddress.ip_address(a)) for a in LOOPBACK_ADDRESSES]
                  ), critical=False), ca_key)

    def rsa_pem(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())

    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM), "ca.key": rsa_pem(ca_key),
        "tls.crt": server.public_bytes(serialization.Encoding.PEM), "tls.key": rsa_pem(server_key),
    }
