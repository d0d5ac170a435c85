"""A throwaway certificate authority, a loopback server certificate, and client certificates the
same CA signs (kube's x509 authentication: CN is the user, each O a group)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_LIFETIME = datetime.timedelta(days=2)


@dataclass(frozen=True)
class ServerCertificate:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_key: ec.EllipticCurvePrivateKey | None = None

    def server_context(self, *, client_certificates: bool = False) -> ssl.SSLContext:
        """The server's TLS context; with `client_certificates`, clients may present a
        certificate this CA signed (optional, so bearer-token clients still connect)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if client_certificates:
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cadata=self.ca_pem.decode())
        # ssl loads chains only from files; the directory lives just long enough to load them.
        with tempfile.TemporaryDirectory() as directory:
            cert, key = Path(directory, "cert.pem"), Path(directory, "key.pem")
            cert.write_bytes(self.cert_pem + self.ca_pem)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context

    def client_certificate(self, user: str, groups: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """A client certificate and key (PEM) for `user` in `groups`, signed by this CA."""
        if self.ca_key is None:
            raise ValueError("this certificate was made without its CA key")
        now = datetime.datetime.now(datetime.UTC)
        ca_cert = x509.load_pem_x509_certificate(self.ca_pem)
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
            + [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                critical=False,
            )
            .sign(self.ca_key, hashes.SHA256())
        )
        return _pem(cert, key)


def _pem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerCertificate:
    """A CA and a leaf it signed, valid for `hosts` (IP addresses and DNS names)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("gha-sandbox actions CA"))
        .issuer_name(_name("gha-sandbox actions CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_pem, key_pem = _pem(cert, key)
    return ServerCertificate(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert_pem,
        key_pem=key_pem,
        ca_key=ca_key,
    )
